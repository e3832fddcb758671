#!/bin/sh
# Provisions a Debian 12 guest for perflab. The same script runs in two places:
#   - inside a chroot, when `perflab vm build` makes the guest image from mmdebstrap;
#   - inside the running guest, as Vagrant's shell provisioner (vm/Vagrantfile).
# It is idempotent: a second run installs nothing and changes nothing.
set -eu

# What the labs run in the guest: the tools, a compiler for the C benchmarks,
# and the Python modules that perflab's measurements and verdicts import (from
# Debian, not PyPI: the guest has no network). Not matplotlib: the host draws
# the figures of what comes back, and Debian's matplotlib pulls in fonttools,
# sympy and tk (a tenth of the image's build time). scipy's pythran wants a
# BLAS to compile against: the small reference one (libblas-dev), not
# OpenBLAS's 100 MB; nothing in the guest multiplies matrices.
PACKAGES="
linux-image-amd64 linux-image-rt-amd64 initramfs-tools kmod
linux-perf bpftrace bpfcc-tools python3-bpfcc libbpf-tools trace-cmd rtla rt-tests
fio stress-ng numactl hwloc-nox util-linux procps iproute2 zstd
build-essential make clang coz-profiler
python3 python3-numpy python3-scipy libblas-dev python3-tqdm
systemd-sysv openssh-server sudo
"

export DEBIAN_FRONTEND=noninteractive

# The initramfs only has to find the root disk on virtio: listing its few modules
# (instead of Debian's MODULES=most) makes it a sixth of the size, which saves
# seconds of every boot under TCG. Written before the kernels are installed, so
# that each kernel's initramfs is made once, already small; drop-in files, so
# that no package's conffile is edited.
initramfs_conf=/etc/initramfs-tools/conf.d/perflab
initramfs_modules=/usr/share/initramfs-tools/modules.d/perflab
stale_initramfs=no
if [ "$(cat "$initramfs_conf" 2>/dev/null)" != "MODULES=list" ] \
        || [ "$(cat "$initramfs_modules" 2>/dev/null)" != "$(printf '%s\n' virtio_pci virtio_blk ext4)" ]; then
    mkdir -p "$(dirname "$initramfs_conf")" "$(dirname "$initramfs_modules")"
    echo "MODULES=list" > "$initramfs_conf"
    printf '%s\n' virtio_pci virtio_blk ext4 > "$initramfs_modules"
    stale_initramfs=yes
fi

# One dpkg-query for every package: one each took 15 s of a Vagrant guest's provisioning under TCG.
installed=" $(dpkg-query -W -f='${Package} ${Status}\n' $PACKAGES 2>/dev/null \
    | awk '$2 " " $3 " " $4 == "install ok installed" { printf "%s ", $1 }')"
missing=""
for package in $PACKAGES; do
    case "$installed" in *" $package "*) ;; *) missing="$missing $package" ;; esac
done
if [ -n "$missing" ]; then
    # No daemon may start inside the build chroot.
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    apt-get update -qq
    # No fsync per file: a guest whose provisioning was cut short is provisioned again, not repaired.
    apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-unsafe-io $missing
    apt-get clean
    rm -f /usr/sbin/policy-rc.d
fi

# Kernels installed before the drop-ins were written (a guest provisioned by an
# older version of this script) still have the large initramfs.
case "$missing" in
    *linux-image*) ;;
    *) [ "$stale_initramfs" = no ] || update-initramfs -u -k all >/dev/null ;;
esac

# Direct QEMU boots skip systemd: the kernel starts this stage-one init, which
# mounts the project tree that QEMU shares over 9p and hands over to the
# project's own vm/guest/init, so changing that needs no image rebuild.
mkdir -p /mnt/perflab-share /perflab /exchange
cat > /usr/local/sbin/perflab-init <<'INIT'
#!/bin/sh
# Debian's initramfs hands over /proc, /sys and /dev already mounted; mount them if not.
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
modprobe -a 9pnet_virtio 9p
if mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 perflab /mnt/perflab-share; then
    exec /mnt/perflab-share/vm/guest/init
fi
echo "perflab-init: the project tree (9p tag perflab) is not shared; starting a shell on the console" > /dev/console
exec /bin/sh </dev/console >/dev/console 2>&1
INIT
chmod 755 /usr/local/sbin/perflab-init

# Direct QEMU boots skip systemd and start /usr/local/sbin/perflab-init (shared
# from the project); Vagrant boots systemd, which needs a hostname, a network
# on the NIC that vagrant-libvirt adds, and its `vagrant` user (password
# "vagrant", Vagrant's convention; direct QEMU boots have no network and no sshd).
echo perflab-guest > /etc/hostname
mkdir -p /etc/systemd/network
printf '[Match]\nName=en* eth*\n[Network]\nDHCP=yes\n' > /etc/systemd/network/80-dhcp.network
systemctl enable systemd-networkd >/dev/null 2>&1 || true
if ! id vagrant >/dev/null 2>&1; then
    useradd --create-home --shell /bin/bash vagrant
fi
echo vagrant:vagrant | chpasswd
echo 'vagrant ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/vagrant
chmod 440 /etc/sudoers.d/vagrant
passwd -d root >/dev/null
