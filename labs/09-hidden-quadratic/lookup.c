/* lookup: find a key among n sorted keys four ways, and time each.
 *
 *   linear  a sorted array, scanned from the start: O(n)
 *   binary  the same array, binary search: O(log n)
 *   tree    a balanced binary search tree, its nodes scattered in memory: O(log n)
 *   list    a sorted linked list, its nodes scattered in memory: O(n)
 *
 * Every lookup is for a key that is there, drawn at random, so no branch
 * predictor can learn the answers. One process visits every (structure, n)
 * once, in an order rotated by -r, and prints one JSON line per visit.
 *
 * usage: lookup [-s SIZES] [-k STRUCTURES] [-t MIN_NS] [-r ROTATION] [-C CPU]
 *   SIZES       comma-separated n (default 4,8,...,16384)
 *   STRUCTURES  comma-separated, from linear,binary,tree,list (default all four)
 *   MIN_NS      time each visit for at least this long (default 1000000)
 */
#include "perflab_bench.h"

#define MAX_SIZES 32
#define KEYS 16384 /* random keys, looked up in turn across batches: too long a sequence for a predictor to learn */
#define BATCH_WORK 65536 /* a timed batch does about this many steps: n/2 per lookup at most */
#define MAX_BATCHES 100000

struct node {
    int key;
    struct node *left, *right; /* tree: children; list: `right` is the next node */
};

static const char *NAMES[] = {"linear", "binary", "tree", "list"};

// ANCHOR: linear
static long find_linear(const int *a, long n, int key)
{
    long i = 0;
    while (i < n && a[i] < key) /* every key before it is compared: n/2 on average */
        i++;
    return i;
}
// ANCHOR_END: linear

// ANCHOR: binary
static long find_binary(const int *a, long n, int key)
{
    long low = 0, high = n; /* log2(n) halvings, each a branch the predictor guesses half wrong */
    while (low < high) {
        long middle = low + (high - low) / 2;
        if (a[middle] < key)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}
// ANCHOR_END: binary

static long find_tree(const struct node *root, int key)
{
    while (root && root->key != key)
        root = key < root->key ? root->left : root->right;
    return root ? root->key : -1;
}

static long find_list(const struct node *head, int key)
{
    while (head && head->key < key)
        head = head->right;
    return head ? head->key : -1;
}

static uint64_t xorshift(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* The tree's nodes in `pool` (already shuffled): node i of the sorted order is pool[slot[i]]. */
static struct node *build_tree(struct node *pool, const long *slot, long low, long high)
{
    if (low >= high)
        return NULL;
    long middle = low + (high - low) / 2;
    struct node *node = &pool[slot[middle]];
    node->key = 2 * (int)middle + 1;
    node->left = build_tree(pool, slot, low, middle);
    node->right = build_tree(pool, slot, middle + 1, high);
    return node;
}

struct structures {
    long n;
    int *array;
    struct node *tree, *list, *tree_pool, *list_pool;
    long *slot;
};

static void build(struct structures *s, long n, uint64_t *seed)
{
    s->n = n;
    s->array = malloc(n * sizeof *s->array);
    s->slot = malloc(n * sizeof *s->slot);
    s->tree_pool = malloc(n * sizeof *s->tree_pool);
    s->list_pool = malloc(n * sizeof *s->list_pool);
    if (!s->array || !s->slot || !s->tree_pool || !s->list_pool)
        perflab_die("out of memory for n = %ld", n);
    for (long i = 0; i < n; i++) {
        s->array[i] = 2 * (int)i + 1; /* odd keys, sorted */
        s->slot[i] = i;
    }
    for (long i = n - 1; i > 0; i--) { /* scatter the nodes: neighbours in order are not neighbours in memory */
        long j = (long)(xorshift(seed) % (uint64_t)(i + 1)), t = s->slot[i];
        s->slot[i] = s->slot[j];
        s->slot[j] = t;
    }
    s->tree = build_tree(s->tree_pool, s->slot, 0, n);
    for (long i = 0; i < n; i++) {
        struct node *node = &s->list_pool[s->slot[i]];
        node->key = s->array[i];
        node->left = NULL;
        node->right = i + 1 < n ? &s->list_pool[s->slot[i + 1]] : NULL;
    }
    s->list = &s->list_pool[s->slot[0]];
}

/* `count` lookups of the keys from keys[*next] on; *next moves on, so no batch repeats the one before. */
static long batch(const struct structures *s, int kind, const int *keys, long count, long *next)
{
    long sum = 0;
    for (long i = 0; i < count; i++) {
        long k = (*next + i) % KEYS;
        switch (kind) {
        case 0: sum += find_linear(s->array, s->n, keys[k]); break;
        case 1: sum += find_binary(s->array, s->n, keys[k]); break;
        case 2: sum += find_tree(s->tree, keys[k]); break;
        default: sum += find_list(s->list, keys[k]);
        }
    }
    *next = (*next + count) % KEYS;
    return sum;
}

static int parse_list(char *text, long *values, long low, long high, const char *what)
{
    int count = 0;
    for (char *item = strtok(text, ","); item; item = strtok(NULL, ",")) {
        char *end;
        long value = strtol(item, &end, 10);
        if (*end || value < low || value > high || count == MAX_SIZES)
            perflab_die("bad %s '%s': give up to %d numbers from %ld to %ld, comma-separated", what, item,
                        MAX_SIZES, low, high);
        values[count++] = value;
    }
    return count;
}

static int parse_kinds(char *text, long *kinds)
{
    int count = 0;
    for (char *item = strtok(text, ","); item; item = strtok(NULL, ",")) {
        int found = -1;
        for (int k = 0; k < 4; k++)
            if (!strcmp(item, NAMES[k]))
                found = k;
        if (found < 0 || count == 4)
            perflab_die("bad structure '%s': choose from linear,binary,tree,list", item);
        kinds[count++] = found;
    }
    return count;
}

int main(int argc, char **argv)
{
    char default_sizes[] = "4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384";
    char default_kinds[] = "linear,binary,tree,list";
    char *sizes_text = default_sizes, *kinds_text = default_kinds;
    long sizes[MAX_SIZES], kinds[4], min_ns = 1000000, rotation = 0, cpu = -1;
    int opt;
    while ((opt = getopt(argc, argv, "s:k:t:r:C:")) != -1) {
        switch (opt) {
        case 's': sizes_text = optarg; break;
        case 'k': kinds_text = optarg; break;
        case 't': min_ns = atol(optarg); break;
        case 'r': rotation = atol(optarg); break;
        case 'C': cpu = atol(optarg); break;
        default: perflab_die("usage: lookup [-s SIZES] [-k linear,binary,tree,list] [-t MIN_NS] [-r ROTATION] [-C CPU]");
        }
    }
    if (min_ns < 1 || rotation < 0)
        perflab_die("-t must be positive and -r not negative");
    int n_sizes = parse_list(sizes_text, sizes, 2, 1 << 24, "size");
    int n_kinds = parse_kinds(kinds_text, kinds);
    if (cpu >= 0)
        perflab_pin_self((int)cpu);
    perflab_print_meta("lookup");

    uint64_t seed = 0x9E3779B97F4A7C15u;
    struct structures built[MAX_SIZES];
    for (int i = 0; i < n_sizes; i++)
        build(&built[i], sizes[i], &seed);
    static int keys[KEYS];
    static double batch_ns[MAX_BATCHES];
    int visits = n_sizes * n_kinds;
    for (int v = 0; v < visits; v++) {
        int visit = (int)((v + rotation) % visits);
        const struct structures *s = &built[visit / n_kinds];
        int kind = (int)kinds[visit % n_kinds];
        for (int k = 0; k < KEYS; k++)
            keys[k] = 2 * (int)(xorshift(&seed) % (uint64_t)s->n) + 1;
        long count = BATCH_WORK / s->n < 16 ? 16 : BATCH_WORK / s->n > KEYS ? KEYS : BATCH_WORK / s->n;
        long next = 0;
        volatile long sum = batch(s, kind, keys, count, &next); /* warm-up: caches and predictors as when timed */
        long batches = 0;
        uint64_t start = perflab_now_ns();
        do { /* many short batches, and their median: a batch the scheduler interrupted is an outlier, not the mean */
            uint64_t begin = perflab_now_ns();
            sum += batch(s, kind, keys, count, &next);
            batch_ns[batches++] = (double)(perflab_now_ns() - begin);
        } while (perflab_now_ns() - start < (uint64_t)min_ns && batches < MAX_BATCHES);
        printf("{\"type\":\"sample\",\"structure\":\"%s\",\"n\":%ld,\"lookups\":%ld,\"ns_per_lookup\":%.4f,\"checksum\":%ld}\n",
               NAMES[kind], s->n, batches * count, perflab_median(batch_ns, batches) / count, (long)sum);
    }
    return 0;
}
