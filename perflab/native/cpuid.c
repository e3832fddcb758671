/* cpuid: print the raw CPUID registers perflab's probe decodes, as one JSON object.
 *
 * Why this exists: most of what the probe needs is in /sys and /proc, but
 * not everything. Whether the last-level cache is inclusive of the lower
 * levels (the bit that decides if evicting a line from L3 also evicts it from
 * every core's L1/L2) is only in CPUID: leaf 4 EDX bit 1 on Intel, leaf
 * 0x8000001D EDX bit 1 on AMD. The kernel does not export it. The hypervisor
 * vendor string (leaf 0x40000000) is also easiest to read here.
 *
 * Output: {"leaves": [{"leaf": L, "subleaf": S, "eax": .., "ebx": .., "ecx": .., "edx": ..}, ...]}
 * Decoding is done in Python (perflab/cpuid.py) so it can be tested on
 * recorded register values from machines we do not have.
 */
#include <stdio.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <string.h>

static int first = 1;

static void leaf(unsigned int l, unsigned int s, unsigned int r[4])
{
    __cpuid_count(l, s, r[0], r[1], r[2], r[3]);
    printf("%s\n  {\"leaf\": %u, \"subleaf\": %u, \"eax\": %u, \"ebx\": %u, \"ecx\": %u, \"edx\": %u}",
           first ? "" : ",", l, s, r[0], r[1], r[2], r[3]);
    first = 0;
}

/* Deterministic cache parameter leaves (4 and 0x8000001D): one subleaf per
 * cache until the cache type field (EAX bits 4:0) reads 0 = "no more caches". */
static void cache_leaves(unsigned int l)
{
    unsigned int r[4];
    for (unsigned int s = 0; s < 32; s++) {
        leaf(l, s, r);
        if ((r[0] & 0x1f) == 0)
            break;
    }
}

int main(void)
{
    unsigned int r[4], max_basic, max_ext;
    char vendor[13];

    printf("{\"leaves\": [");
    leaf(0, 0, r);
    max_basic = r[0];
    memcpy(vendor, &r[1], 4);           /* vendor string is EBX, EDX, ECX */
    memcpy(vendor + 4, &r[3], 4);
    memcpy(vendor + 8, &r[2], 4);
    vendor[12] = '\0';

    leaf(1, 0, r);
    int hypervisor = (r[2] >> 31) & 1;  /* leaf 1 ECX bit 31: running under a hypervisor */

    if (max_basic >= 4)
        cache_leaves(4);
    if (max_basic >= 7)
        leaf(7, 0, r);
    if (hypervisor)
        leaf(0x40000000, 0, r);

    leaf(0x80000000, 0, r);
    max_ext = r[0];
    if (max_ext >= 0x80000001)
        leaf(0x80000001, 0, r);
    if (max_ext >= 0x8000001D &&
        (strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0))
        cache_leaves(0x8000001D);

    printf("\n]}\n");
    return 0;
}

#else

int main(void)
{
    printf("{\"error\": \"not x86\"}\n");
    return 0;
}

#endif
