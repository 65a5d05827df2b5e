#!/bin/sh
# /init of the kernel-test guest (busybox, Debian's stock kernel).
#
# Loads the Bluetooth modules, asks the host for the first LED peripheral,
# starts the vhci <-> virtio-serial bridge (hci0 appears; hci_uart on a pty
# where the kernel has no hci_vhci), runs the test list
# (/tests.sh) and powers off. Each test talks to the host harness over the
# virtio-serial port "attled.ctl", one request line and one answer line:
#   hello | plan NAMES | profile DEVICE-SPEC | begin NAME | expect SECS JSON
#   | expect_none SECS JSON | data LINE | compare_trace DEVICE-SPEC ARGS
#   | mqtt | mqtt_kill | mqtt_mark | mqtt_publish TOPIC PAYLOAD
#   | mqtt_expect SECS TOPIC TEXT|JSON | serve public|random ARGS
#   | serve_line SECS TEXT | serve_stop SECS | result NAME pass|fail SECS REASON | done
# The host judges what happened on the air (the LED peripheral's events);
# the guest judges exit codes, output and the adapter's state.
export PATH=/bin
# The arm64 initramfs has only /bin/busybox and /bin/sh: the applet links are
# made here (run.sh cannot run an aarch64 busybox to list them).
[ -e /bin/mount ] || /bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# Pseudo-terminals (vhci_bridge -u's hci_uart controller is on one).
mkdir -p /dev/pts
mount -t devpts devpts /dev/pts
mkdir -p /tmp
mount -t tmpfs tmpfs /tmp

say() { echo "guest: $*"; }
halt_now() { sync; poweroff -f; sleep 3; reboot -f; }

# KVM probe boot: just prove the kernel boots to userspace.
case " $(cat /proc/cmdline) " in
*" attled.probe=1 "*) echo "KVMPROBE OK"; halt_now ;;
esac

while read -r m; do
    insmod "/lib/modules/$m" || say "insmod $m failed"
done </lib/modules/load.order

# The user-mode NIC (virtio-net): 10.0.2.2 is the host's loopback, where the
# gateway test's broker listens.
ip link set lo up
if [ -e /sys/class/net/eth0 ]; then
    ip addr add 10.0.2.15/24 dev eth0 && ip link set eth0 up || say "eth0 set-up failed"
else
    say "no eth0: the gateway test cannot reach the host's broker"
fi

# /dev node of the virtio-serial port named $1 (waits up to 5 s for it).
port_dev() {
    i=0
    while [ $i -lt 100 ]; do
        for d in /sys/class/virtio-ports/*; do
            if [ "$(cat "$d/name" 2>/dev/null)" = "$1" ] && [ -e "/dev/${d##*/}" ]; then
                echo "/dev/${d##*/}"
                return 0
            fi
        done
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}

CTL=$(port_dev attled.ctl) || { say "no virtio-serial port attled.ctl"; halt_now; }
exec 3<>"$CTL"

# One request to the host; its one-line answer lands in CTL_REPLY.
ctl() {
    printf '%s\n' "$*" >&3
    CTL_REPLY=""
    IFS= read -r -t 120 CTL_REPLY <&3 || CTL_REPLY="fail: no answer from the host"
}

ctl hello
say "host: $CTL_REPLY"
say "kernel $(uname -r), $(uname -m)"

. /tests.sh

# attled.list=NAME on the kernel command line: TEST_LIST_NAME (upper case)
# instead of the whole list (run.sh's KERNELVM_LIST).
LIST=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^attled\.list=//p')
if [ -n "$LIST" ]; then
    case $LIST in *[!A-Za-z0-9_-]*) ctl "result list fail 0 attled.list=$LIST: letters, digits, _ and - only"; ctl done; halt_now ;; esac
    var=TEST_LIST_$(echo "$LIST" | tr 'a-z-' 'A-Z_')
    eval "TEST_LIST=\${$var-}"
    [ -n "$TEST_LIST" ] || { ctl "result list_$LIST fail 0 no $var in tests.sh"; ctl done; halt_now; }
    say "test list $LIST ($var)"
fi

# The test list: words; "@DEVICE-SPEC" makes the host switch the LED peripheral.
ctl plan $(for t in $TEST_LIST; do case $t in @*) ;; *) printf '%s ' "$t" ;; esac; done)

uptime_s() { cut -d' ' -f1 /proc/uptime; }

# Runs test_$1 in a subshell with set -e; fail() records the reason.
run_test() {
    name=$1
    ctl "begin $name"
    echo "=== BEGIN $name"
    rm -f /tmp/reason
    t0=$(uptime_s)
    if [ -n "$PROFILE_ERROR" ]; then
        echo "$PROFILE_ERROR" >/tmp/reason
        rc=1
    else
        (set -e; "test_$name") 2>&1
        rc=$?
    fi
    t1=$(uptime_s)
    secs=$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")
    if [ $rc = 0 ]; then
        res=pass; reason=""
    else
        res=fail; reason=$(head -n 1 /tmp/reason 2>/dev/null)
        [ -n "$reason" ] || reason="exited $rc"
    fi
    echo "=== END $name $res $secs s $reason"
    ctl "result $name $res $secs $reason"
}

for item in $TEST_LIST; do
    case $item in
    @*)
        # A new device: attled's GATT/address cache (/var/cache/attled, as
        # root) starts empty; within a profile, runs after the first are warm.
        rm -rf /var/cache/attled
        ctl "profile ${item#@}"
        case $CTL_REPLY in
        ok*) PROFILE_ERROR="" ; say "peripheral ${item#@}" ;;
        *) PROFILE_ERROR="host could not start peripheral ${item#@}: $CTL_REPLY"; say "$PROFILE_ERROR" ;;
        esac
        if [ -z "$BRIDGE_PID" ]; then
            # The controller appears only now, so that the first test meets
            # the kernel's own setup of a fresh hci0.
            # It starts slow (each answer to a command delayed 40 ms) so the
            # kernel's setup lasts long enough for the first test to meet it;
            # every test ends with the delay off (SIGUSR2).
            # Without hci_vhci (Debian's arm64 kernel), an hci_uart controller on a pty.
            if [ -e /dev/vhci ]; then uart=""; else uart=-u; fi
            vhci_bridge -d 40 $uart attled.hci &
            BRIDGE_PID=$!
            hcictl wait hci0 present 30 && say "$(hcictl state hci0)"
        fi
        ;;
    *)
        run_test "$item"
        kill -USR2 "$BRIDGE_PID" 2>/dev/null
        ;;
    esac
done

ctl done
say "test list finished"
halt_now
