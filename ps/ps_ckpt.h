/* ps_ckpt.h: the parameter server's checkpoint messages (private to ps/). SAVE worker0 -> server: one
 * frame, the checkpoint's base name (the server writes its shard to "<base>.s<index>", core/shard.h);
 * the answer SAVE server -> worker0: key = the server's index, one frame psc_saved_t; or ERROR naming
 * what failed. A resume goes through INIT (ps_proto.h): worker 0 sends each partition's values and, after
 * them, a psc_state_t frame and the partition's optimizer buffers, one frame each. */
#ifndef SB_PS_CKPT_H
#define SB_PS_CKPT_H
#include <stdint.h>

#define PSC_BASE_MAX 1000     /* bytes of a base name, NUL included */

typedef struct {
    uint64_t bytes, hash;     /* the shard file's size and stored hash */
} psc_saved_t;

typedef struct {
    uint64_t applied;         /* optimizer steps applied before the resume (Adam's t continues from it) */
    uint32_t nopt, pad;       /* optimizer buffer frames that follow */
} psc_state_t;

#endif
