// XXH3 (the checksum of every block and trace record) from the system's
// xxhash.h, compiled into its callers (XXH_INLINE_ALL, the header's own
// mode for this) instead of called in libxxhash.so: the hash is inlined where
// blocks are verified, and a program start loads one shared library fewer
// (`pacset --version`: see the README's benchmark table). Include this, not
// <xxhash.h>.
#pragma once

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>
