// What the rest of the recorder needs from the recording session (recording_session.cc):
// its clock rate and a way to wake its stream writer.
#pragma once

namespace opsight::record {

// The recorder's clock, chosen and measured once per process (at the first session).
double session_ticks_per_second();

// Wakes the running session's stream writer (a chunk was handed over); does nothing when
// no session runs. Caller holds the registry lock: stop_recording forgets the writer under
// it before deleting it.
void notify_stream_writer();

}  // namespace opsight::record
