/* mpi.h: the MPI engine: MPI_Allreduce (OpenMPI) behind the engine contract, the reference for our
 * host ring and tree in bench and in training. Built only when OpenMPI's compiler wrapper is found
 * (the Makefile defines SB_MPI). Its ranks must be MPI processes: started by mpirun (the harness
 * starts them through mpirun for --engine mpi --procs N). */
#ifndef SB_MPI_ENGINE_H
#define SB_MPI_ENGINE_H
#include "core/engine.h"

extern const engine_ops_t mpi_engine;

/* The MPI library and version, as MPI_Get_library_version says it, cut at the first comma
 * ("Open MPI v4.1.6"); callable before MPI is initialised. */
const char *mpi_engine_library(void);

#endif
