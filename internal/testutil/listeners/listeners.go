/*
Copyright 2026 The lockwarden Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package listeners reads, from Linux's /proc, which TCP addresses a process listens on, so that
// tests can prove that the servers they start (the local cluster's components, redis-server,
// ZooKeeper, the SQL servers, etcd) are reachable from loopback only. It asks the kernel rather
// than the process's flags: a default that a flag does not override (ZooKeeper's all-interfaces
// client port, kwokctl's 0.0.0.0) shows up here, and nowhere else.
package listeners

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// stateListen is TCP_LISTEN in the st column of /proc/net/tcp (include/net/tcp_states.h).
const stateListen = "0A"

// Socket is one listening TCP socket of a /proc/net/tcp or /proc/net/tcp6 table.
type Socket struct {
	// Addr is the local address and port the socket listens on.
	Addr netip.AddrPort
	// Inode identifies the socket; a process holds it as a descriptor linking to socket:[Inode].
	Inode uint64
}

// ParseTable returns the listening sockets of a /proc/net/tcp or /proc/net/tcp6 table. The
// kernel prints each address as 32-bit words read in the host's byte order, given as order
// (binary.NativeEndian for this machine's tables): 127.0.0.1 reads 0100007F on a little-endian
// machine. The port is plain hex.
func ParseTable(table string, order binary.ByteOrder) ([]Socket, error) {
	var out []Socket
	sc := bufio.NewScanner(strings.NewReader(table))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if n == 1 || len(f) == 0 {
			continue // the header: sl local_address rem_address st ...
		}
		if len(f) < 10 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 10: %q", n, len(f), sc.Text())
		}
		if f[3] != stateListen {
			continue
		}
		addr, err := parseAddrPort(f[1], order)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: inode %q: %w", n, f[9], err)
		}
		out = append(out, Socket{Addr: addr, Inode: inode})
	}
	return out, sc.Err()
}

// parseAddrPort parses a local_address column: 8 (IPv4) or 32 (IPv6) hex digits, a colon, and
// the port in 4 hex digits.
func parseAddrPort(s string, order binary.ByteOrder) (netip.AddrPort, error) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q: no port", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: port: %w", s, err)
	}
	raw, err := hex.DecodeString(hexAddr)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q: want 8 or 32 hex digits", s)
	}
	// Each 32-bit word was printed as a number (%08X) of the bytes the host holds in network
	// order: read the number, then lay it out as the host does.
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		order.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

// socketInode returns the inode of a descriptor's link target when it is a socket ("socket:[N]").
func socketInode(link string) (uint64, bool) {
	s, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	inode, err := strconv.ParseUint(s, 10, 64)
	return inode, err == nil
}

// Of returns the addresses that process pid listens on over TCP (IPv4 and IPv6), read from its
// descriptors and its network namespace's socket tables under /proc.
func Of(pid int) ([]netip.AddrPort, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return nil, fmt.Errorf("process %d: reading its descriptors: %w", pid, err)
	}
	held := map[uint64]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if err != nil {
			continue // closed since ReadDir
		}
		if inode, ok := socketInode(link); ok {
			held[inode] = true
		}
	}
	var out []netip.AddrPort
	for _, name := range []string{"tcp", "tcp6"} {
		table, err := os.ReadFile(filepath.Join(dir, "net", name))
		if errors.Is(err, os.ErrNotExist) && name == "tcp6" {
			continue // a kernel without IPv6
		}
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", pid, err)
		}
		sockets, err := ParseTable(string(table), binary.NativeEndian)
		if err != nil {
			return nil, fmt.Errorf("process %d: /proc/net/%s: %w", pid, name, err)
		}
		for _, s := range sockets {
			if held[s.Inode] {
				out = append(out, s.Addr)
			}
		}
	}
	return out, nil
}

// LoopbackOnly returns nil when process pid listens on at least one TCP address and on loopback
// addresses (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) alone. Otherwise its error names the process
// (name, pid) and every address and port it listens on outside loopback, or says that it listens
// on nothing, so that a check of a server that never started cannot pass.
func LoopbackOnly(name string, pid int) error {
	addrs, err := Of(pid)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return Check(name, pid, addrs)
}

// Check is LoopbackOnly's verdict on the addresses that process pid, called name, listens on.
func Check(name string, pid int, addrs []netip.AddrPort) error {
	if len(addrs) == 0 {
		return fmt.Errorf("%s (pid %d) listens on no TCP address", name, pid)
	}
	var exposed []string
	for _, a := range addrs {
		if !a.Addr().IsLoopback() {
			exposed = append(exposed, a.String())
		}
	}
	if len(exposed) > 0 {
		return fmt.Errorf("%s (pid %d) listens outside loopback on %s", name, pid, strings.Join(exposed, ", "))
	}
	return nil
}
