// Linux's epoll (sys/epoll.h), which Swift's Glibc module does not export.
// The gateway registers the broker's socket and the signal pipe in one epoll
// set whose descriptor is the event loop's single wake-up source.
#include <sys/epoll.h>
