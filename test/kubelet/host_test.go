package kubelet_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The kubelet is a host daemon: it tunes kernel settings, bind-mounts its root folder, listens
// on a device-plugin socket at a fixed path and creates a few fixed folders. This file records
// the host's state before the kubelet starts and puts it back afterwards.

// kubeletSysctls are the kernel settings the kubelet's container manager writes at start
// (setupKernelTunables), as paths under /proc/sys.
var kubeletSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// hostPath is a fixed path the kubelet (or the mount(8) it runs) may create.
type hostPath struct {
	path string
	// tree: remove it with what it holds; else remove it only while empty (it may be shared).
	tree bool
}

// kubeletHostPaths are the paths the kubelet creates whatever its --root-dir: the device
// manager's socket, the container log folders, and util-linux's mount state folder.
var kubeletHostPaths = []hostPath{
	{"/var/lib/kubelet/device-plugins/kubelet.sock", true},
	{"/var/log/containers", true},
	{"/var/log/pods", true},
	{"/run/mount", false},
}

// deviceManagerSocket is where the kubelet's device manager serves, whatever its root folder.
const deviceManagerSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"

// saveSysctls records the kernel settings the kubelet changes, and extra ones, and restores
// them in t.Cleanup.
func saveSysctls(t *testing.T, extra ...string) {
	t.Helper()
	saved := map[string]string{}
	for _, s := range append(slices.Clone(kubeletSysctls), extra...) {
		b, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			// A kernel without that setting: the kubelet cannot change it either.
			continue
		}
		saved[s] = strings.TrimSpace(string(b))
	}
	t.Cleanup(func() {
		for s, v := range saved {
			p := filepath.Join("/proc/sys", s)
			b, err := os.ReadFile(p)
			if err == nil && strings.TrimSpace(string(b)) == v {
				continue
			}
			if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
				t.Errorf("restore sysctl %s=%s: %v", s, v, err)
				continue
			}
			t.Logf("restored sysctl %s: %s → %s", s, strings.TrimSpace(string(b)), v)
		}
	})
}

// removeCreatedHostPaths removes, in t.Cleanup, the shallowest missing ancestor-or-self of
// each of kubeletHostPaths and extra: what the daemons create and was not there before.
func removeCreatedHostPaths(t *testing.T, extra ...hostPath) {
	t.Helper()
	var created []hostPath
	for _, p := range append(slices.Clone(kubeletHostPaths), extra...) {
		if m := firstMissing(p.path); m != "" && !slices.ContainsFunc(created, func(c hostPath) bool { return c.path == m }) {
			created = append(created, hostPath{m, p.tree})
		}
	}
	t.Cleanup(func() {
		for _, p := range created {
			if !p.tree {
				_ = os.Remove(p.path) // only while empty
				continue
			}
			if err := os.RemoveAll(p.path); err != nil {
				t.Errorf("remove %s, created by the kubelet: %v", p.path, err)
			}
		}
	})
}

// firstMissing returns the shallowest of p and its ancestors that does not exist, or "" when
// p exists.
func firstMissing(p string) string {
	if _, err := os.Lstat(p); err == nil {
		return ""
	}
	missing := p
	for dir := filepath.Dir(p); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(dir); err == nil {
			break
		}
		missing = dir
	}
	return missing
}

// unmountUnder unmounts, in t.Cleanup, every mount at or below dir (the kubelet bind-mounts
// its root folder onto itself to make it rshared), and fails the test if any remains.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	t.Cleanup(func() {
		mounts, err := mountsUnder(dir)
		if err != nil {
			t.Errorf("read mounts: %v", err)
			return
		}
		// Deepest first: later entries of mountinfo are stacked on earlier ones.
		for i := len(mounts) - 1; i >= 0; i-- {
			if err := syscall.Unmount(mounts[i], 0); err != nil {
				if err := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
					t.Errorf("unmount %s: %v", mounts[i], err)
					continue
				}
			}
			t.Logf("unmounted %s", mounts[i])
		}
		if left, err := mountsUnder(dir); err != nil || len(left) > 0 {
			t.Errorf("still mounted under %s after cleanup: %q (%v)", dir, left, err)
		}
	})
}

// mountsUnder lists the mount points at or below dir, in /proc/self/mountinfo order.
func mountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMountinfo decodes the octal escapes (\040 for a space, ...) of a mountinfo field.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// addLoopbackIP adds a /32 address from 10.255.0.0/24 not yet used on this host to lo, removes
// it in t.Cleanup and returns it. The kubelet refuses a loopback --node-ip but accepts any
// address of a local interface; nothing connects to it.
func addLoopbackIP(t *testing.T) string {
	t.Helper()
	used := map[string]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				used[ipn.IP.String()] = true
			}
		}
	}
	for i := 1; i < 255; i++ {
		ip := fmt.Sprintf("10.255.0.%d", i)
		if used[ip] {
			continue
		}
		out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "File exists") {
				continue
			}
			t.Fatalf("ip addr add %s/32 dev lo: %v: %s", ip, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").CombinedOutput(); err != nil {
				t.Errorf("ip addr del %s/32 dev lo: %v: %s", ip, err, out)
			}
		})
		return ip
	}
	t.Fatal("no free address in 10.255.0.0/24 for the kubelet's --node-ip")
	return ""
}

// hostSystemUUID returns the DMI product uuid the kubelet reports as the Node's systemUUID
// (cAdvisor reads /sys/class/dmi/id/product_uuid), lower-cased, or "" when it is unreadable.
func hostSystemUUID() string {
	for _, p := range []string{"/sys/class/dmi/id/product_uuid", "/sys/devices/virtual/dmi/id/product_uuid"} {
		if b, err := os.ReadFile(p); err == nil {
			if u := strings.ToLower(strings.TrimSpace(string(b))); u != "" {
				return u
			}
		}
	}
	return ""
}

// process is a host daemon the tests run (the kubelet, and for the real cluster etcd, the
// control plane and containerd) in its own process group.
type process struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{}
	err     error // set before exited closes
	log     string
}

// startProcess starts bin with args in its own process group, its output in logFile, and
// kills the whole group in t.Cleanup (the kernel also kills it if the test process dies),
// showing the end of its log when the test failed.
func startProcess(t *testing.T, name, bin, logFile string, args ...string) *process {
	t.Helper()
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{}), log: logFile}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("%s log (last lines):\n%s", name, tail(p.log, 40))
		}
	})
	return p
}

// kill kills the process group and waits for the process to exit.
func (p *process) kill(t *testing.T) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("%s (pid %d) still running 10 s after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tailString(string(b), n)
}

// chain is an iptables chain: the command (iptables or ip6tables), its table and its name.
type chain struct{ bin, table, name string }

// removeNewChains removes, in t.Cleanup, the iptables and ip6tables chains created during the
// test (filter, nat and mangle tables), with the rules that jump to them, and reports each: the
// kubelet's own (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) must not appear with
// makeIPTablesUtilChains false, and the test's DNAT chain is gone by then.
func removeNewChains(t *testing.T) {
	t.Helper()
	before := map[chain]bool{}
	for _, c := range chains() {
		before[c] = true
	}
	t.Cleanup(func() {
		for _, c := range chains() {
			if before[c] {
				continue
			}
			t.Errorf("%s -t %s: chain %s created during the test; removing it", c.bin, c.table, c.name)
			rules, _ := exec.Command(c.bin, "-w", "-t", c.table, "-S").Output()
			for _, r := range strings.Split(string(rules), "\n") {
				f := strings.Fields(r)
				if j := slices.Index(f, "-j"); len(f) > 1 && f[0] == "-A" && j > 0 && j+1 < len(f) && f[j+1] == c.name {
					_ = exec.Command(c.bin, append([]string{"-w", "-t", c.table, "-D"}, f[1:]...)...).Run()
				}
			}
			_ = exec.Command(c.bin, "-w", "-t", c.table, "-F", c.name).Run()
			_ = exec.Command(c.bin, "-w", "-t", c.table, "-X", c.name).Run()
		}
	})
}

// chains lists the user-defined chains of the filter, nat and mangle tables, IPv4 and IPv6.
func chains() []chain {
	var out []chain
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			b, err := exec.Command(bin, "-w", "-t", table, "-S").Output()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if name, ok := strings.CutPrefix(line, "-N "); ok {
					out = append(out, chain{bin, table, strings.TrimSpace(name)})
				}
			}
		}
	}
	return out
}
