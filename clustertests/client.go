package clustertests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// clientIP is the client namespace's address on the cluster's bridge.
const clientIP = "10.77.0.200"

// Dialer attaches a client namespace to the cluster's bridge (address
// 10.77.0.200, like a client machine on the nodes' network: a
// partitioned node is cut off from it too) once, and returns a dial
// function for kgo.Dialer or an http.Transport that opens every
// connection from inside that namespace. The test process stays in its
// own namespace: each dial runs on a fresh OS thread moved into the
// client namespace (setns), and the socket keeps the namespace it was
// created in.
func (c *Cluster) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	c.t.Helper()
	if c.clientNS == "" {
		ns := c.prefix + "-cl"
		c.ip("netns", "add", ns)
		c.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		c.ip("link", "add", "hc", "netns", c.hub, "type", "veth", "peer", "name", "eth0", "netns", ns)
		c.ip("-n", c.hub, "link", "set", "hc", "master", "br0", "up")
		c.ip("-n", ns, "addr", "add", clientIP+"/24", "dev", "eth0")
		c.ip("-n", ns, "link", "set", "eth0", "up")
		c.ip("-n", ns, "link", "set", "lo", "up")
		c.clientNS = ns
	}
	path := "/var/run/netns/" + c.clientNS
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialInNamespace(ctx, path, network, addr)
	}
}

// dialInNamespace dials addr from the network namespace at nsPath: the
// goroutine locks its thread, moves it into the namespace, creates the
// socket (which keeps the namespace it was created in), moves the thread
// back and unlocks it. If moving back fails the thread stays locked and
// ends with the goroutine, so no other goroutine ever runs in the client
// namespace. (Had the thread been the process's main thread, which Go
// never ends, `ip netns pids` would list the test process as living in
// the client namespace: its cleanup therefore kills nothing.)
func dialInNamespace(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer func() { _ = home.Close() }()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer func() { _ = target.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("setns %s: %v", nsPath, err)}
			return
		}
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := d.DialContext(ctx, network, addr)
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}
