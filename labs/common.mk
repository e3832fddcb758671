# The one build file every C benchmark shares. A lab's Makefile sets
#   SRC_DIR (optional, default: the lab folder), OUT (build folder name)
#   and PROGRAMS, then includes this file.
# The flags are compiled into each binary (PERFLAB_CFLAGS) so every result
# records exactly how its benchmark was built.

REPO     := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
CC       ?= cc
CFLAGS   ?= -O2 -g -Wall -Wextra -std=gnu11 -pthread
LDLIBS   ?= -pthread
SRC_DIR  ?= .
BUILD    := $(REPO)/build/$(OUT)
BINARIES := $(addprefix $(BUILD)/,$(PROGRAMS))

all: $(BINARIES)

$(BUILD)/%: $(SRC_DIR)/%.c $(REPO)/labs/common.mk $(REPO)/labs/perflab_bench.h | $(BUILD)
	$(CC) $(CFLAGS) -I$(REPO)/labs -DPERFLAB_CFLAGS='"$(CFLAGS)"' -o $@ $< $(LDLIBS)

$(BUILD):
	mkdir -p $@

# One variant of a program: any SOURCE into any OUTPUT, with the lab's flags
# followed by EXTRA_CFLAGS (a later -O wins). Exercises and compiler
# comparisons build this way, e.g.
#   make -C labs/06-loop-alignment variant SOURCE=seed.c OUTPUT=/tmp/seed CC=clang EXTRA_CFLAGS=-O0
variant:
	@test -n "$(SOURCE)" -a -n "$(OUTPUT)" || { echo "variant needs SOURCE=file.c and OUTPUT=path" >&2; exit 2; }
	@mkdir -p $(dir $(OUTPUT))
	$(CC) $(CFLAGS) $(EXTRA_CFLAGS) -I$(REPO)/labs -DPERFLAB_CFLAGS='"$(CFLAGS) $(EXTRA_CFLAGS)"' -o $(OUTPUT) $(SOURCE) $(LDLIBS)

clean:
	rm -f $(BINARIES)

.PHONY: all clean variant
