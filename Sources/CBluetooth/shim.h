// Kernel ABI for the Linux HCI user channel, from libbluetooth-dev's headers.
// Only types and constants are used; no libbluetooth function is called, so
// nothing is linked.
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/l2cap.h>

// Function-like ioctl macros do not import into Swift; export their values.
static const unsigned long attled_HCIDEVUP = HCIDEVUP;
static const unsigned long attled_HCIDEVDOWN = HCIDEVDOWN;
static const unsigned long attled_HCIGETDEVINFO = HCIGETDEVINFO;
static const int attled_AF_BLUETOOTH = AF_BLUETOOTH;
static const int attled_BTPROTO_HCI = BTPROTO_HCI;
static const int attled_HCI_CHANNEL_USER = HCI_CHANNEL_USER;
