// Memory over time: a thread that reads the traced total and the resident set size every
// interval, and begins each moment of the run (moments.hpp). It touches no Python state and
// allocates only from libc.
#pragma once

#include <cstdint>
#include <vector>

#include "snapshot.hpp"

namespace memlens::timeline {

// Starts the thread (interval > 0). False when out of memory.
bool start(double interval_ms);
// Stops and joins the thread (releasing the GIL meanwhile), then adds the state at the end;
// returns the end's time, end_time() (the run's clock, which started before this one's), read
// once the thread has taken its last point and moment.
double stop(double (*end_time)());
// The points so far (only once the thread has stopped; empty while it runs).
void points(std::vector<TimelinePoint>& out);
// Seconds since the timeline started: the clock of its points and of the run's moments.
double elapsed();
// Frees the points.
void reset();
// In a forked child: the thread does not exist there.
void forget_thread();
int64_t read_rss();

}  // namespace memlens::timeline
