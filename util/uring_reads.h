// Many reads of one file at once through an io_uring, from one thread: one
// system call submits them all (the block layer sends them to the device
// together) and their completions need no thread switch. On this project's
// paravirtualised VM a blocking pread per thread pays a wake-up, a device
// kick and an interrupt per read; measured in fs/DESIGN.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pacset {

// Whether the calling thread can have its ring (the kernel allows io_uring).
bool UringAvailable();

// Reads lens[i] bytes at offsets[i] of fds[i] into bufs[i] for every i < n: up to the
// ring's depth (64) in flight, each completion making room for the next read
// at once; res[i] is the bytes read (short at the end of the file) or
// -errno. False when the kernel refuses io_uring (too old, a seccomp
// filter) or the ring fails: then res means nothing and the caller reads
// another way. Each calling thread keeps one ring for its later calls.
bool UringReadAll(const int* fds, const uint64_t* offsets, const uint32_t* lens, char* const* bufs,
                  size_t n, int* res);

}  // namespace pacset
