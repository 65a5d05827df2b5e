# The kernel test list: sourced by the guest's /init (busybox sh).
#
# TEST_LIST runs in order in one boot (TEST_LIST_NAME instead, when the
# kernel command line has attled.list=NAME: run.sh's KERNELVM_LIST). "@NAME:PROFILE[:k=v,...]" asks the host
# to replace the LED peripheral on the virtual air (a vworld --device spec);
# every other word runs test_WORD in a subshell with `set -e`: a failing
# check (fail) ends the test and its first reason is reported. The host
# judges what the peripheral saw (host/host_none: vworld events since the
# test began); the guest judges exit codes, output and hci0's state.

TEST_LIST="
@CassarTech:pycom
open_during_kernel_setup
kernel_brings_hci0_up
open_while_kernel_powers_up
scan_lists_cassartech
set_pycom
get_pycom
trace_same_as_tcp
busy_while_scanning
sigterm_mid_scan_then_next_run
down_adapter_stays_down
error_exit_restores_adapter
missing_adapter_hci1
permission_denied
sudo_drops_privileges
sudo_sigkill_still_restores
gateway_pycom
kernel_central_drives_serve_random
kernel_central_drives_serve_public
@CassarTech:pycom:secure=enc
pair_protected_pycom
bonded_pycom_encrypts
@CassarTech:particle
set_particle
get_particle
@CassarTech:harness:notify_every=50
send_harness
listen_harness
sigint_ends_listen
busy_while_listening
"

# A shorter list for the arm64 guest where software emulation is slow
# (KERNELVM_ARCH=arm64 KERNELVM_LIST=arm64; the guest gets attled.list=arm64;
# by default arm64 runs the whole list too): the kernel's setup met in
# progress, scan, the --rgb job and get, the trace, busy, the error exits, the
# gateway, the kernel as the central against attled serve, pairing and the
# bonded run, and the notifying harness.
TEST_LIST_ARM64="
@CassarTech:pycom
open_during_kernel_setup
kernel_brings_hci0_up
scan_lists_cassartech
set_pycom
get_pycom
trace_same_as_tcp
busy_while_scanning
error_exit_restores_adapter
missing_adapter_hci1
permission_denied
gateway_pycom
kernel_central_drives_serve_random
@CassarTech:pycom:secure=enc
pair_protected_pycom
bonded_pycom_encrypts
@CassarTech:harness:notify_every=50
send_harness
listen_harness
"

ATTLED=/bin/attled

# ---------------------------------------------------------------------------
# Helpers

fail() {
    echo "FAIL: $*"
    [ -s /tmp/reason ] || echo "$*" >/tmp/reason
    return 1
}

# Prints a file indented, at most 80 lines.
show() {
    [ -s "$1" ] || return 0
    n=$(wc -l <"$1")
    head -n 80 "$1" | sed 's/^/    | /'
    [ "$n" -le 80 ] || echo "    | ... ($n lines)"
}

# att ARGS: runs attled, bounded in time; stdout in /tmp/out, stderr in /tmp/err, exit code in RC.
att() {
    echo "\$ attled $*"
    RC=0
    timeout -s KILL 45 "$ATTLED" "$@" >/tmp/out 2>/tmp/err || RC=$?
    show /tmp/out
    show /tmp/err
    echo "  -> exit $RC"
}

# att_as UID ARGS: att as an unprivileged user (no CAP_NET_ADMIN).
att_as() {
    uid=$1; shift
    echo "\$ (uid $uid) attled $*"
    RC=0
    timeout -s KILL 45 hcictl asuser "$uid" "$ATTLED" "$@" >/tmp/out 2>/tmp/err || RC=$?
    show /tmp/out
    show /tmp/err
    echo "  -> exit $RC"
}

# bg NAME ARGS: starts attled in the background (busybox timeout execs it in
# place, so the pid is attled's); output in /tmp/NAME.out and /tmp/NAME.err.
bg() {
    n=$1; shift
    echo "\$ attled $* &    [$n]"
    timeout -s KILL 60 "$ATTLED" "$@" >"/tmp/$n.out" 2>"/tmp/$n.err" &
    echo $! >"/tmp/$n.pid"
}

alive() {
    st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

# bg_wait NAME SECS: waits (bounded) for a background attled; exit code in RC.
bg_wait() {
    pid=$(cat "/tmp/$1.pid")
    i=$(($2 * 20))
    while alive "$pid"; do
        i=$((i - 1))
        if [ $i -le 0 ]; then
            echo "  [$1] still running after $2 s: killed"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.05
    done
    RC=0
    wait "$pid" || RC=$?
    show "/tmp/$1.out"
    show "/tmp/$1.err"
    echo "  [$1] -> exit $RC"
}

# wait_line FILE TEXT SECS: until FILE has a line containing TEXT.
wait_line() {
    i=$(($3 * 20))
    while ! grep -q -- "$2" "$1" 2>/dev/null; do
        i=$((i - 1))
        if [ $i -le 0 ]; then
            show "$1"
            fail "no line '$2' in $1 within $3 s"
            return 1
        fi
        sleep 0.05
    done
}

want_rc() { [ "$RC" = "$1" ] || fail "attled exited $RC, expected $1"; }
want_out() { grep -q -- "$1" /tmp/out || fail "stdout lacks '$1'"; }
want_err() { grep -q -- "$1" /tmp/err || fail "stderr lacks '$1'"; }

# host SECS JSON: the host saw a vworld event matching JSON (a subset) since the test began.
host() {
    ctl "expect $1 $2"
    echo "  host: $CTL_REPLY"
    case $CTL_REPLY in pass*) ;; *) fail "host: $CTL_REPLY" ;; esac
}

# mq SECS TOPIC TEXT|JSON: the host's broker got a message on TOPIC (since the
# test began, or since the last "ctl mqtt_mark") whose payload is TEXT or whose
# JSON holds JSON. {node} in TOPIC or JSON is the peripheral's node id.
mq() {
    ctl "mqtt_expect $1 $2 $3"
    echo "  broker: $CTL_REPLY"
    case $CTL_REPLY in pass*) ;; *) fail "broker: $CTL_REPLY" ;; esac
}

# host_none SECS JSON: no such event since the test began (after SECS of grace).
host_none() {
    ctl "expect_none $1 $2"
    echo "  host: $CTL_REPLY"
    case $CTL_REPLY in pass*) ;; *) fail "host: $CTL_REPLY" ;; esac
}

# adapter_is up|down: hci0's flags (HCIGETDEVINFO, as hciconfig reads them).
adapter_is() {
    s=$(hcictl state hci0) || true
    echo "  $s"
    case "$1:$s" in
    up:"hci0 UP"*|down:"hci0 DOWN"*) ;;
    *) fail "hci0 should be $1: $s" ;;
    esac
}

# ---------------------------------------------------------------------------
# Tests (profile pycom)

# The first run meets a fresh hci0 while the kernel is still running its own
# setup on it (the bridge starts slow): the bind fails with EBUSY until the
# setup is over, and attled retries it for a bounded time. The kernel had
# powered the adapter only for its setup (auto-off, reported down), so it
# is left down, as found.
test_open_during_kernel_setup() {
    s=$(hcictl state hci0) || true
    echo "  before: $s"
    case $s in *INIT*) ;; *) fail "the kernel's setup of hci0 was already over: $s" ;; esac
    att scan -i hci0 --timeout 1.5
    kill -USR2 "$BRIDGE_PID"
    want_rc 0
    want_out '"CassarTech"'
    adapter_is down
}

# After a user-channel run the kernel can power the adapter up and set it up.
test_kernel_brings_hci0_up() {
    hcictl up hci0 || fail "HCIDEVUP failed"
    hcictl wait hci0 up 10 || fail "hci0 did not come up"
    adapter_is up
}

# The kernel is powering the adapter up (HCIDEVUP in progress, slow
# controller) when attled starts: EBUSY while it runs its init sequence, then
# the adapter is up and attled brings it down to bind; it is up after the run.
test_open_while_kernel_powers_up() {
    hcictl down hci0 || fail "HCIDEVDOWN failed"
    kill -USR1 "$BRIDGE_PID"
    hcictl up hci0 &
    up=$!
    sleep 0.2
    s=$(hcictl state hci0) || true
    echo "  powering up: $s"
    case $s in *INIT*) ;; *) fail "hci0 was not in the kernel's power-up sequence: $s" ;; esac
    att scan -i hci0 --timeout 1
    kill -USR2 "$BRIDGE_PID"
    wait "$up" || fail "HCIDEVUP failed"
    want_rc 0
    want_out '"CassarTech"'
    adapter_is up
}

test_scan_lists_cassartech() {
    adapter_is up
    att scan -i hci0 --timeout 2
    want_rc 0
    want_out '"CassarTech"'
    want_out '(pycom)'
    adapter_is up
}

test_set_pycom() {
    adapter_is up
    att -i hci0 --name CassarTech --rgb 255,0,0
    want_rc 0
    want_err 'attled: write'
    host 5 '{"event":"state","device":"CassarTech","profile":"pycom","rgb":[255,0,0]}'
    host 2 '{"event":"write","device":"CassarTech","op":"request"}'
    host 5 '{"event":"disconnected","device":"CassarTech","reason":19}'
    adapter_is up
}

# Pairing over the kernel's user channel: the LED characteristics need an
# encrypted link; Bumble's SMP judges attled's confirm and DHKey Check values.
test_pair_protected_pycom() {
    att -i hci0 --name CassarTech --rgb 0,255,0
    want_rc 0
    want_err 'attled: pair'
    host 5 '{"event":"pairing","device":"CassarTech","result":"complete","sc":true}'
    host 5 '{"event":"state","device":"CassarTech","rgb":[0,255,0]}'
    adapter_is up
}

# The next run encrypts with the stored bond (the virtual controller compares
# the LTK) and does not pair again.
test_bonded_pycom_encrypts() {
    att -i hci0 --name CassarTech --rgb 0,0,255
    want_rc 0
    want_err 'with the stored bond'
    host 5 '{"event":"encryption","device":"CassarTech","enabled":true,"during_pairing":false}'
    host 5 '{"event":"state","device":"CassarTech","rgb":[0,0,255]}'
    host_none 1 '{"event":"pairing"}'
    adapter_is up
}

test_get_pycom() {
    att -i hci0 --name CassarTech get
    want_rc 0
    [ "$(cat /tmp/out)" = "255,0,0 #ff0000" ] || fail "get printed '$(cat /tmp/out)', expected '255,0,0 #ff0000'"
    host 5 '{"event":"read","device":"CassarTech"}'
    adapter_is up
}

# --trace over the user channel: the packet sequence equals the one the host
# gets for the same command over TCP against the same kind of virtual world.
test_trace_same_as_tcp() {
    # Both sides trace a controller attled already knows (its description
    # remembered): a short scan first, here and on the host's reference.
    att -i hci0 scan --timeout 0.2
    want_rc 0
    att -i hci0 --name CassarTech --rgb 0,0,255 --trace --no-cache
    want_rc 0
    want_err 'Write Request (0x12)'
    want_err 'ATT transactions:'
    host 5 '{"event":"state","device":"CassarTech","rgb":[0,0,255]}'
    while IFS= read -r l; do printf 'data %s\n' "$l" >&3; done </tmp/err
    ctl "compare_trace CassarTech:pycom --name CassarTech --rgb 0,0,255 --trace --no-cache"
    echo "  host: $CTL_REPLY"
    case $CTL_REPLY in pass*) ;; *) fail "trace: $CTL_REPLY" ;; esac
    adapter_is up
}

# A second attled while the first holds hci0 (scanning): EBUSY message, exit
# 75, and the first finishes its scan undisturbed.
test_busy_while_scanning() {
    bg first scan -i hci0 --timeout 5
    wait_line /tmp/first.err 'Ctrl-C stops' 20
    att -i hci0 --name CassarTech --rgb 1,2,3
    want_rc 75
    want_err 'hci0 is busy: another program holds its HCI user channel'
    bg_wait first 25
    want_rc 0
    grep -q '"CassarTech"' /tmp/first.out || fail "the first attled's scan lost CassarTech"
    grep -q 'attled: scan:' /tmp/first.err || fail "the first attled's scan did not end normally"
    host_none 0.2 '{"event":"state","device":"CassarTech","rgb":[1,2,3]}'
    adapter_is up
}

# SIGTERM mid-scan: exit 143, hci0 given back up, and the next run works.
test_sigterm_mid_scan_then_next_run() {
    bg victim scan -i hci0 --timeout 20
    wait_line /tmp/victim.err 'Ctrl-C stops' 20
    sleep 0.3
    kill -TERM "$(cat /tmp/victim.pid)"
    bg_wait victim 15
    want_rc 143
    grep -q 'interrupted by SIGTERM' /tmp/victim.err || fail "no 'interrupted by SIGTERM' message"
    adapter_is up
    att -i hci0 --name CassarTech --rgb 0,255,0
    want_rc 0
    host 5 '{"event":"state","device":"CassarTech","rgb":[0,255,0]}'
    adapter_is up
}

# attled restores the state it found: an adapter that was down stays down.
test_down_adapter_stays_down() {
    hcictl down hci0 || fail "HCIDEVDOWN failed"
    adapter_is down
    att scan -i hci0 --timeout 1
    want_rc 0
    want_out '"CassarTech"'
    adapter_is down
    hcictl up hci0 || fail "HCIDEVUP failed"
    adapter_is up
}

# attled fails (device not found): the adapter is given back all the same.
test_error_exit_restores_adapter() {
    adapter_is up
    att -i hci0 --name Absent --rgb red --timeout 1
    want_rc 3
    adapter_is up
}

test_missing_adapter_hci1() {
    att scan -i hci1 --timeout 1
    want_rc 69
    want_err 'hci1: no such Bluetooth adapter'
    adapter_is up
}

# Without CAP_NET_ADMIN: exit 77 with the sudo/setcap advice; hci0 untouched,
# whether it was up (HCIDEVDOWN refused) or down (bind refused).
test_permission_denied() {
    att_as 65534 -i hci0 --name CassarTech --rgb 9,9,9
    want_rc 77
    want_err 'permission denied (HCIDEVDOWN) on hci0'
    want_err 'setcap cap_net_admin+ep'
    adapter_is up
    hcictl down hci0 || fail "HCIDEVDOWN failed"
    att_as 65534 scan -i hci0 --timeout 1
    want_rc 77
    want_err 'permission denied (bind HCI_CHANNEL_USER) on hci0'
    adapter_is down
    hcictl up hci0 || fail "HCIDEVUP failed"
    adapter_is up
    host_none 0.1 '{"event":"connected","device":"CassarTech"}'
}

# Started through sudo (SUDO_UID/SUDO_GID set, running as root): attled drops
# to that user once hci0's user channel is open, the socket keeps working, and
# a root helper brings hci0 back up after attled exits.
test_sudo_drops_privileges() {
    adapter_is up
    export SUDO_UID=65534 SUDO_GID=65534
    att -i hci0 --name CassarTech --rgb 1,2,3 --trace --no-cache
    unset SUDO_UID SUDO_GID
    want_rc 0
    want_err 'dropped root privileges: now uid 65534 gid 65534; a root helper will bring hci0 back up'
    host 5 '{"event":"state","device":"CassarTech","profile":"pycom","rgb":[1,2,3]}'
    hcictl wait hci0 up 10 || fail "hci0 did not come back up after the privileged helper"
}

# Even SIGKILL (no clean-up at all in attled) leaves hci0 up again: the helper
# sees its pipe close.
test_sudo_sigkill_still_restores() {
    adapter_is up
    export SUDO_UID=65534 SUDO_GID=65534
    "$ATTLED" scan -i hci0 --timeout 20 >/tmp/out 2>/tmp/err &
    pid=$!
    unset SUDO_UID SUDO_GID
    found=0; i=0
    while [ $i -lt 300 ]; do
        if grep -q CassarTech /tmp/out 2>/dev/null; then found=1; break; fi
        i=$((i + 1)); sleep 0.05
    done
    uid_line=$(grep '^Uid:' /proc/$pid/status 2>/dev/null || true)
    # No clean-up at all in attled: the root helper must see its pipe close.
    kill -KILL $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    [ $found = 1 ] || { show /tmp/err; fail "scan never listed CassarTech"; }
    echo "$uid_line" | grep -q '65534' || fail "attled still ran as: $uid_line"
    hcictl wait hci0 up 12 || { show /tmp/err; fail "hci0 stayed down after SIGKILL"; }
    adapter_is up
}

# attled gateway on hci0, its broker (mosquitto) on the host across the guest's
# user-mode NIC; the host's MQTT client judges what it publishes. This is the
# debug build of the same tree (/bin/attled-gw, shared libraries copied): the
# static attled has no gateway, as Debian has no static libmosquitto.
# Discovery and availability; a Home Assistant command reaches the LED scaled
# by brightness and the state follows; the broker killed and restarted: the
# gateway reconnects and republishes and commands work again; the lamp gone
# and back: unavailable, then online with its state read back; SIGTERM
# publishes offline, exits 0, and hci0 is up again.
test_gateway_pycom() {
    adapter_is up
    ctl mqtt
    case $CTL_REPLY in "ok "*) port=${CTL_REPLY#ok } ;; *) fail "no broker on the host: $CTL_REPLY" ;; esac
    echo "\$ attled-gw gateway -i hci0 --mqtt 10.0.2.2:$port --name CassarTech &    [gw]"
    timeout -s KILL 90 /bin/attled-gw gateway -i hci0 --mqtt "10.0.2.2:$port" --name CassarTech >/tmp/gw.out 2>/tmp/gw.err &
    echo $! >/tmp/gw.pid
    mq 20 'homeassistant/light/attled_{node}/light/config' '{"schema":"json","command_topic":"attled/{node}/set","supported_color_modes":["rgb"]}'
    mq 20 'attled/{node}/availability' online
    mq 5 'attled/gateway/availability' online
    mq 10 'attled/{node}/state' '{"color_mode":"rgb"}'
    ctl 'mqtt_publish attled/{node}/set {"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50}}'
    host 10 '{"event":"state","device":"CassarTech","profile":"pycom","rgb":[100,50,25]}'
    mq 10 'attled/{node}/state' '{"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50}}'
    # The broker dies (SIGKILL: no retained messages survive) and comes back.
    ctl mqtt_mark
    ctl mqtt_kill
    ctl mqtt
    case $CTL_REPLY in "ok "*) ;; *) fail "the broker did not restart: $CTL_REPLY" ;; esac
    mq 30 'homeassistant/light/attled_{node}/light/config' '{"command_topic":"attled/{node}/set"}'
    mq 10 'attled/{node}/availability' online
    ctl 'mqtt_publish attled/{node}/set {"state":"OFF"}'
    host 10 '{"event":"state","device":"CassarTech","profile":"pycom","rgb":[0,0,0]}'
    # The lamp goes away (the host replaces the peripheral: same address, 7,8,9
    # on it): unavailable at once, back online when it advertises again, and
    # its state read back from the device.
    ctl mqtt_mark
    ctl "profile CassarTech:pycom:init=7,8,9"
    case $CTL_REPLY in ok*) ;; *) fail "the host could not replace the peripheral: $CTL_REPLY" ;; esac
    mq 10 'attled/{node}/availability' offline
    mq 20 'attled/{node}/availability' online
    mq 10 'attled/{node}/state' '{"state":"ON","color":{"r":7,"g":8,"b":9}}'
    ctl mqtt_mark
    kill -TERM "$(cat /tmp/gw.pid)"
    bg_wait gw 10
    want_rc 0
    mq 5 'attled/{node}/availability' offline
    mq 5 'attled/gateway/availability' offline
    adapter_is up
}

# The kernel as the central, attled as the device: `attled serve --profile
# pycom` on the host (another controller on the same virtual air) advertises
# the board; hci0 stays the kernel's (no user channel). random: that
# controller has no public address, so serve advertises with a static random
# one (BDADDR_LE_RANDOM for the kernel), and runs with --json (the host judges
# its JSON events); public: its public F0:..:03, and the host judges serve's
# stderr lines ("serve LED 255,128,1 (#ff8001) by ADDR"). le_att_client opens an
# L2CAP LE socket on the ATT channel to serve's advertised address, the kernel
# makes the LE connection, and the client's own ATT (Exchange MTU, Find By
# Type Value, Read By Type 0x2803, Write Requests, Read Requests back) sets
# the LED, and serve refuses a 2-octet write and a read of handle 0. The host judges serve's events (the colour changes, by this
# adapter's address), then ends serve with SIGINT (exit 0).
serve_stop_now() { ctl "serve_stop 10"; echo "  host: $CTL_REPLY"; }
# serve_line SECS TEXT: attled serve printed a stderr line holding TEXT.
serve_line() {
    ctl "serve_line $1 $2"
    echo "  host: $CTL_REPLY"
    case $CTL_REPLY in pass*) ;; *) fail "host: $CTL_REPLY" ;; esac
}
test_kernel_central_drives_serve_random() { kernel_central_drives_serve random --json; }
test_kernel_central_drives_serve_public() { kernel_central_drives_serve public; }
kernel_central_drives_serve() {
    adapter_is up
    me=$(hcictl state hci0 | sed -n 's/.*bdaddr=//p')
    json=${2:-}
    ctl "serve $1 --profile pycom --name Served $json"
    echo "  host: $CTL_REPLY"
    case $CTL_REPLY in "ok "*) ;; *) fail "host: attled serve: $CTL_REPLY" ;; esac
    set -- $CTL_REPLY "$1"
    addr=$2 type=$3
    [ "$type" = "$4" ] || { serve_stop_now; fail "attled serve advertises with a $type address, expected $4"; }
    echo "\$ le_att_client -t 20 $addr $type 255,128,1"
    RC=0
    timeout -s KILL 45 le_att_client -t 20 "$addr" "$type" 255,128,1 >/tmp/out 2>&1 || RC=$?
    show /tmp/out
    echo "  -> exit $RC"
    [ $RC = 0 ] || { serve_stop_now; fail "le_att_client exited $RC: $(grep -m 1 'error' /tmp/out)"; }
    want_out 'ok: 255,128,1 written and read back' || { serve_stop_now; return 1; }
    if [ -z "$json" ]; then
        serve_line 10 "serve connected $me" || { serve_stop_now; return 1; }
        serve_line 5 "serve LED 255,128,1 (#ff8001) by $me" || { serve_stop_now; return 1; }
        serve_line 10 "serve disconnected $me" || { serve_stop_now; return 1; }
        serve_stop_now
        case $CTL_REPLY in pass*) ;; *) fail "host: $CTL_REPLY" ;; esac
        adapter_is up
        return 0
    fi
    host 10 "{\"source\":\"serve\",\"event\":\"connected\",\"peer\":\"$me\"}" || { serve_stop_now; return 1; }
    host 5 "{\"source\":\"serve\",\"event\":\"write\",\"handle\":20,\"value\":\"01\",\"op\":\"request\",\"peer\":\"$me\"}" || { serve_stop_now; return 1; }
    host 5 "{\"source\":\"serve\",\"event\":\"state\",\"profile\":\"pycom\",\"rgb\":[255,128,1],\"peer\":\"$me\"}" || { serve_stop_now; return 1; }
    # The refused 2-octet write reached no LED.
    host_none 0.1 '{"source":"serve","event":"write","value":"0000"}' || { serve_stop_now; return 1; }
    # The socket closed: the kernel drops the link.
    host 10 "{\"source\":\"serve\",\"event\":\"disconnected\",\"peer\":\"$me\"}" || { serve_stop_now; return 1; }
    serve_stop_now
    case $CTL_REPLY in pass*) ;; *) fail "host: $CTL_REPLY" ;; esac
    adapter_is up
}

# ---------------------------------------------------------------------------
# Profile particle

test_set_particle() {
    att -i hci0 --name CassarTech --rgb 255,0,0
    want_rc 0
    host 5 '{"event":"state","device":"CassarTech","profile":"particle","rgb":[255,0,0]}'
    host 2 '{"event":"write","device":"CassarTech","op":"command"}'
    host_none 0.1 '{"event":"write","device":"CassarTech","op":"request"}'
    host 5 '{"event":"disconnected","device":"CassarTech","reason":19}'
    adapter_is up
}

test_get_particle() {
    att -i hci0 --name CassarTech get
    want_rc 0
    [ "$(cat /tmp/out)" = "255,0,0 #ff0000" ] || fail "get printed '$(cat /tmp/out)', expected '255,0,0 #ff0000'"
    adapter_is up
}

# ---------------------------------------------------------------------------
# Profile harness (notifies every 50 ms)

test_send_harness() {
    att -i hci0 --name CassarTech send --value 01
    want_rc 0
    host 5 '{"event":"state","device":"CassarTech","profile":"harness","buttons":[1,0]}'
    adapter_is up
}

test_listen_harness() {
    att -i hci0 --name CassarTech listen --count 3 --json
    want_rc 0
    n=$(grep -c '"event":"notification"' /tmp/out) || true
    [ "$n" = 3 ] || fail "$n notification lines, expected 3"
    host 5 '{"event":"subscribed","device":"CassarTech"}'
    adapter_is up
}

# Ctrl-C ends listen normally (exit 0): link torn down, hci0 given back.
test_sigint_ends_listen() {
    bg l -i hci0 --name CassarTech listen
    wait_line /tmp/l.err 'Ctrl-C stops' 20
    sleep 0.2
    kill -INT "$(cat /tmp/l.pid)"
    bg_wait l 15
    want_rc 0
    host 5 '{"event":"disconnected","device":"CassarTech","reason":19}'
    adapter_is up
}

# A second attled while the first holds hci0 (listening): EBUSY, exit 75, and
# the listener gets every notification it asked for.
test_busy_while_listening() {
    bg listener -i hci0 --name CassarTech listen --count 40 --json
    wait_line /tmp/listener.err 'Ctrl-C stops' 20
    att -i hci0 --name CassarTech send --value 03
    want_rc 75
    want_err 'hci0 is busy: another program holds its HCI user channel'
    bg_wait listener 30
    want_rc 0
    n=$(grep -c '"event":"notification"' /tmp/listener.out) || true
    [ "$n" = 40 ] || fail "the listener got $n notifications, expected 40"
    host_none 0.2 '{"event":"state","device":"CassarTech","buttons":[1,1]}'
    adapter_is up
}
