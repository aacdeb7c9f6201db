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

package listeners

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// header is the first line of /proc/net/tcp, which ParseTable skips.
const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

// row is a /proc/net/tcp line with the given local address, state and inode.
func row(local, state, inode string) string {
	return "   0: " + local + " 00000000:0000 " + state + " 00000000:00000000 00:00000000 00000000     0        0 " + inode + " 1 0000000000000000 100 0 0 10 0\n"
}

// Lines as a little-endian kernel prints them (x86, arm64).
func TestParseTable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table string
		want  []Socket
	}{
		{"IPv4 loopback", row("0100007F:1F90", "0A", "11"), []Socket{{netip.MustParseAddrPort("127.0.0.1:8080"), 11}}},
		{"IPv4 elsewhere in 127/8", row("0A00007F:0050", "0A", "12"), []Socket{{netip.MustParseAddrPort("127.0.0.10:80"), 12}}},
		{"IPv4 any", row("00000000:7FFD", "0A", "13"), []Socket{{netip.MustParseAddrPort("0.0.0.0:32765"), 13}}},
		{"IPv4 host address", row("0F02000A:0016", "0A", "14"), []Socket{{netip.MustParseAddrPort("10.0.2.15:22"), 14}}},
		{"IPv6 loopback", row("00000000000000000000000001000000:0CEA", "0A", "21"), []Socket{{netip.MustParseAddrPort("[::1]:3306"), 21}}},
		{"IPv6 any", row("00000000000000000000000000000000:1A0A", "0A", "22"), []Socket{{netip.MustParseAddrPort("[::]:6666"), 22}}},
		{"IPv4-mapped loopback", row("0000000000000000FFFF00000100007F:18EB", "0A", "23"), []Socket{{netip.MustParseAddrPort("[::ffff:127.0.0.1]:6379"), 23}}},
		{"IPv4-mapped any", row("0000000000000000FFFF000000000000:18EB", "0A", "24"), []Socket{{netip.MustParseAddrPort("[::ffff:0.0.0.0]:6379"), 24}}},
		{"IPv6 global", row("B80D0120000000000000000001000000:01BB", "0A", "25"), []Socket{{netip.MustParseAddrPort("[2001:db8::1]:443"), 25}}},
		{"not listening: established, time-wait", row("0100007F:1F90", "01", "31") + row("00000000:1F91", "06", "0"), nil},
		{"several, blank lines ignored", row("0100007F:0001", "0A", "41") + "\n" + row("00000000:0002", "0A", "42"),
			[]Socket{{netip.MustParseAddrPort("127.0.0.1:1"), 41}, {netip.MustParseAddrPort("0.0.0.0:2"), 42}}},
		{"header only", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseTable(header+tc.table, binary.LittleEndian)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// A big-endian kernel prints the address's bytes in network order.
func TestParseTableBigEndian(t *testing.T) {
	g := NewWithT(t)
	got, err := ParseTable(header+row("7F000001:1F90", "0A", "1")+row("00000000000000000000000000000001:0050", "0A", "2"), binary.BigEndian)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]Socket{{netip.MustParseAddrPort("127.0.0.1:8080"), 1}, {netip.MustParseAddrPort("[::1]:80"), 2}}))
}

func TestParseTableRejectsGarbage(t *testing.T) {
	for name, line := range map[string]string{
		"too few fields":  "   0: 0100007F:1F90 00000000:0000 0A\n",
		"no port":         row("0100007F", "0A", "1"),
		"odd address":     row("0100007:1F90", "0A", "1"),
		"5-byte address":  row("0100007F00:1F90", "0A", "1"),
		"not hex":         row("0100007G:1F90", "0A", "1"),
		"port too large":  row("0100007F:10000", "0A", "1"),
		"inode not a num": row("0100007F:1F90", "0A", "x"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTable(header+line, binary.LittleEndian)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

func TestSocketInode(t *testing.T) {
	for _, tc := range []struct {
		link  string
		inode uint64
		ok    bool
	}{
		{"socket:[12345]", 12345, true},
		{"socket:[]", 0, false},
		{"socket:[12a]", 0, false},
		{"pipe:[12345]", 0, false},
		{"anon_inode:[eventpoll]", 0, false},
		{"/var/lib/etcd/member/wal/0.wal", 0, false},
	} {
		inode, ok := socketInode(tc.link)
		if inode != tc.inode || ok != tc.ok {
			t.Errorf("socketInode(%q) = %d, %v; want %d, %v", tc.link, inode, ok, tc.inode, tc.ok)
		}
	}
}

func TestCheck(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name  string
		addrs []netip.AddrPort
		want  string // a substring of the error; empty: no error
	}{
		{"IPv4 loopback", []netip.AddrPort{ap("127.0.0.1:2379"), ap("127.0.0.1:2380")}, ""},
		{"all of 127/8", []netip.AddrPort{ap("127.1.2.3:80")}, ""},
		{"IPv6 loopback", []netip.AddrPort{ap("[::1]:6443")}, ""},
		{"IPv4-mapped loopback", []netip.AddrPort{ap("[::ffff:127.0.0.1]:6443")}, ""},
		{"IPv4 any", []netip.AddrPort{ap("127.0.0.1:2379"), ap("0.0.0.0:32765")}, "etcd (pid 42) listens outside loopback on 0.0.0.0:32765"},
		{"IPv6 any", []netip.AddrPort{ap("[::]:32764")}, "outside loopback on [::]:32764"},
		{"IPv4-mapped any", []netip.AddrPort{ap("[::ffff:0.0.0.0]:1")}, "outside loopback on [::ffff:0.0.0.0]:1"},
		{"a host address", []netip.AddrPort{ap("10.0.2.15:22")}, "outside loopback on 10.0.2.15:22"},
		{"every exposed address named", []netip.AddrPort{ap("0.0.0.0:1"), ap("127.0.0.1:2"), ap("[::]:3")}, "outside loopback on 0.0.0.0:1, [::]:3"},
		{"nothing at all", nil, "etcd (pid 42) listens on no TCP address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := Check("etcd", 42, tc.addrs)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			}
		})
	}
}

// Of finds this test process's own loopback listeners, IPv4 and IPv6, and nothing it does not
// hold.
func TestOf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	g := NewWithT(t)
	before, err := Of(os.Getpid())
	g.Expect(err).NotTo(HaveOccurred())

	var want []netip.AddrPort
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil && strings.HasPrefix(addr, "[") {
			continue // no IPv6 loopback on this machine
		}
		g.Expect(err).NotTo(HaveOccurred())
		defer l.Close()
		want = append(want, netip.MustParseAddrPort(l.Addr().String()))
	}
	got, err := Of(os.Getpid())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(ConsistOf(append(before, want...)))
	g.Expect(LoopbackOnly("this test", os.Getpid())).To(Succeed())

	_, err = Of(1 << 30) // no such process
	g.Expect(err).To(HaveOccurred())
}
