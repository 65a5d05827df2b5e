// Linux's epoll (sys/epoll.h), which Swift's Glibc module does not export.
// BLETransport's EventLoop keeps every watched descriptor (the broker's
// socket, the signal pipe, the terminal) in one epoll set, whose descriptor
// the controller's transport polls beside its own.
#include <sys/epoll.h>
