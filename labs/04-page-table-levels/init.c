/* init: the whole user space of lab 4's quick-run guests, started by the kernel as PID 1.
 *
 * A quick run boots the guest image's kernel with a tiny initramfs that holds
 * this program and a static build of faults, instead of the Debian guest:
 * the kernel reaches the first fault in seconds, not after a minute of
 * userspace and compiling. It prints the kernel's VmallocTotal line (which
 * says the paging mode), then faults' rounds of anonymous and file faults,
 * then, after a mark, anonymous faults hinted above 2^47; everything goes to
 * the serial console the host reads. Then it powers the VM off.
 *
 * usage: init [WORD...] PAGES ROUNDS, the last two words the kernel gives it
 * (the words after "--" on its command line come last; words it does not
 * know, such as nokaslr, come first)
 * example: qemu ... -append "console=ttyS0 nokaslr rdinit=/init -- 1024 9"
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run one program and wait for it; say on the console if it failed, so the host's parser sees why. */
static void run(char *const argv[])
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        printf("== failed: %s %s (status %d)\n", argv[0], argv[2], status);
}

static void paging_mode_line(void)
{
    char line[256];
    FILE *meminfo = fopen("/proc/meminfo", "r");
    while (meminfo && fgets(line, sizeof line, meminfo))
        if (!strncmp(line, "VmallocTotal", 12))
            fputs(line, stdout);
    if (meminfo)
        fclose(meminfo);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && getpid() == 1) {
        char *pages = argv[argc - 2], *rounds = argv[argc - 1];
        mount("proc", "/proc", "proc", 0, NULL);
        paging_mode_line();
        run((char *const[]){"/faults", "-m", "anon", "-p", pages, "-r", rounds, NULL});
        run((char *const[]){"/faults", "-m", "file", "-p", pages, "-r", rounds, "-f", "/tmp/faults.dat", NULL});
        puts("== faults -H");
        run((char *const[]){"/faults", "-m", "anon", "-p", pages, "-r", rounds, "-H", NULL});
        fflush(stdout);
        sync();
        reboot(RB_POWER_OFF);
    }
    fprintf(stderr, "usage: init [WORD...] PAGES ROUNDS, as PID 1 of lab 4's quick-run guest\n");
    return 2;
}
