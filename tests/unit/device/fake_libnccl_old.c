/*
 * A stand-in for an NCCL too old for the daemons' path (2.10: no ncclGetLastError, no
 * non-blocking communicators), built as libnccl.so.2 into a directory of its own: the loader
 * must refuse it and say which entry it lacks (unit.nccl_old).
 */
int ncclGetVersion(int *version);
const char *ncclGetErrorString(int result);

int ncclGetVersion(int *version)
{
    *version = 21003;
    return 0;
}

const char *ncclGetErrorString(int result)
{
    return result == 0 ? "no error" : "unhandled error";
}
