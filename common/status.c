#include <collective.h>

const char *coll_strerror(coll_status_t status)
{
    switch (status) {
#define COLL_STATUS_TEXT(name, value, text)                                                        \
    case COLL_##name:                                                                              \
        return text;
        COLL_STATUS_MAP(COLL_STATUS_TEXT)
#undef COLL_STATUS_TEXT
    }
    return "unknown status";
}

const char *coll_err_name(coll_status_t status)
{
    switch (status) {
#define COLL_STATUS_NAME(name, value, text)                                                        \
    case COLL_##name:                                                                              \
        return "COLL_" #name;
        COLL_STATUS_MAP(COLL_STATUS_NAME)
#undef COLL_STATUS_NAME
    }
    return "COLL_ERR_UNKNOWN";
}
