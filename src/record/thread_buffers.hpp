// Each recording thread's side of the recorder, shared by its source files: the thread's
// record in the registry (made at its first chunk or name, retired by a thread_local hook
// at its exit), the async track it writes on, and the events it lost while the chunk pool
// was empty (replayed first in its next chunk). Defined in thread_buffers.cc with the
// chunk pool and the hot path's slow half (reserve_slow). Everything here concerns the
// calling thread only; functions that take a Registry need its lock where they say so.
#pragma once

#include <cstdint>
#include <string_view>

#include "record/registry.hpp"

namespace opsight::record {

// Set once this thread's thread_local destructors have run: it must not register again.
extern thread_local constinit bool t_thread_exited;
// This thread's record in the registry; nullptr until the thread registers.
extern thread_local constinit ThreadRecord* t_thread_record;

// Adds a record for the calling thread to the registry. Caller holds the registry lock.
ThreadRecord& register_thread(Registry& reg);

// Constructs the thread's exit hook (its destructor runs at thread exit). Must be called
// before taking the registry lock: registering a TLS destructor takes glibc's loader lock,
// and a library constructor running under that lock may be waiting for ours.
void arm_thread_exit_hook();

// This thread's async track (switch_track) in the current session: the key it last asked
// for and the key its written stream is on (they differ only after a dropped switch).
// Belongs to session `generation`; a new session starts every thread on key 0.
struct TrackState {
  uint64_t generation = 0;
  uint64_t requested_key = 0;
  uint64_t written_key = 0;
};
extern thread_local constinit TrackState t_track;

inline void sync_track_generation(uint64_t generation) {
  if (t_track.generation != generation) t_track = TrackState{generation, 0, 0};
}

// What this thread lost for lack of memory (thread_buffers.cc); nullptr until its first
// drop.
struct LostEvents;
extern thread_local constinit LostEvents* t_lost;

// Notes a switch to track `key` (named `name`, possibly empty) that could not be written.
void note_lost_track_switch(uint64_t key, std::string_view name, uint64_t generation);

// The name of a dropped switch to `key` not yet written, or empty.
std::string_view pending_track_name(uint64_t key, uint64_t generation);

// A named switch to `key` was written: a dropped switch's name for it is no longer pending.
void forget_pending_track_name(uint64_t key);

}  // namespace opsight::record
