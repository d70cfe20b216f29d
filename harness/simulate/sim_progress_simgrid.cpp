// sim_progress_simgrid.cpp: the one thing the replay needs that SimGrid's C API lacks (3.32): how many of a
// communication's bytes are still to go, so that a stream's receiver can hold a piece once the flow has carried it.
#include <simgrid/s4u/Comm.hpp>

extern "C" double h_sim_comm_left(sg_comm_t c);

// Bytes still to go; 0 once done (and before it started: the replay's mailboxes are eager, so a put starts at once).
extern "C" double h_sim_comm_left(sg_comm_t c)
{
    return c ? c->get_remaining() : 0;
}
