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

// Package zktest runs real standalone ZooKeeper servers for tests. Each server listens on a free
// loopback port, keeps its data in a t.TempDir(), and is stopped by its PID when the test ends. A
// test can kill a server (SIGKILL) and restart it on the same port with the same data directory,
// as a crashed server comes back: sessions whose timeout has not passed survive, with their
// ephemeral nodes.
//
// The server is Debian's zookeeper package (ZooKeeper 3.8, Java 17):
//
//	java -Xmx256m -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar \
//	    org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg
//
// zookeeper.jar's manifest Class-Path names the other jars it needs in /usr/share/java, so the
// class path needs no more. The configuration file binds 127.0.0.1 only, sets tickTime to 1 s (so
// that sessions may time out after 2 to 20 s), turns off the admin HTTP server (port 8080 by
// default) and allows the `srvr` four-letter word, which tells when the server is ready.
//
// When the package is missing the tests fail, never skip, and say how to install it. ZK_JAR and
// JAVA may name another jar and java binary.
package zktest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/internal/testutil/proc"
)

// InstallCommand installs the ZooKeeper server the tests need (Debian, as root).
const InstallCommand = "apt-get update && apt-get install -y zookeeper"

// DefaultJar is where Debian's zookeeper package puts the server.
const DefaultJar = "/usr/share/java/zookeeper.jar"

// ConfDir is Debian's configuration directory, first on the class path for log4j settings.
const ConfDir = "/etc/zookeeper/conf"

const (
	// startTimeout bounds how long a JVM may take to answer `srvr` after it was started, generous
	// for a loaded 2-core machine.
	startTimeout = 60 * time.Second
	// startAttempts is how often Start tries another free port when a server cannot bind one.
	startAttempts = 3
	// TickTime is the server's tick: sessions may time out after 2 to 20 ticks.
	TickTime = time.Second
)

// Server is one standalone ZooKeeper server process.
type Server struct {
	t    testing.TB
	java string
	jar  string
	// Dir is the server's data directory, kept across restarts.
	Dir string
	// Port is the loopback port the server listens on, kept across restarts.
	Port int

	// proc is the server process, nil before the first start.
	proc *proc.Process
}

// Start starts a ZooKeeper server on a free loopback port and waits until it answers `srvr`. The
// server is killed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	java, jar := binaries(t)
	s := &Server{t: t, java: java, jar: jar, Dir: t.TempDir()}
	t.Cleanup(s.cleanup)
	var err error
	for range startAttempts {
		if s.Port, err = proc.FreePort(); err != nil {
			t.Fatalf("zktest: finding a free port: %v", err)
		}
		if err = s.start(); err == nil {
			return s
		}
	}
	t.Fatalf("zktest: %v", err)
	return nil
}

// Addr is the server's address, 127.0.0.1:port.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
}

// PID is the process ID of the running server; 0 when it is not running.
func (s *Server) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Kill kills the server with SIGKILL and waits until it has exited. Its data directory stays.
func (s *Server) Kill() {
	s.t.Helper()
	if s.PID() == 0 {
		s.t.Fatalf("zktest: Kill: the server on port %d is not running", s.Port)
	}
	s.kill()
}

// Restart starts a killed server again on the same port and data directory, and waits until it
// answers `srvr`.
func (s *Server) Restart() {
	s.t.Helper()
	if s.PID() != 0 {
		s.t.Fatalf("zktest: Restart: the server on port %d is still running; Kill it first", s.Port)
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("zktest: restarting: %v", err)
	}
}

// Srvr sends the `srvr` four-letter word and returns the answer.
func (s *Server) Srvr() (string, error) {
	return fourLetterWord(s.Addr(), "srvr", 2*time.Second)
}

// config is the server's zoo.cfg.
func (s *Server) config() string {
	return strings.Join([]string{
		"tickTime=" + strconv.Itoa(int(TickTime/time.Millisecond)),
		"dataDir=" + filepath.Join(s.Dir, "data"),
		"clientPort=" + strconv.Itoa(s.Port),
		"clientPortAddress=127.0.0.1",
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,ruok,stat,cons",
		"",
	}, "\n")
}

// start runs the server and waits until it answers `srvr`.
func (s *Server) start() error {
	cfg := filepath.Join(s.Dir, "zoo.cfg")
	err := os.WriteFile(cfg, []byte(s.config()), 0o644)
	if err != nil {
		return err
	}
	if s.proc == nil {
		s.proc, err = proc.Start(proc.Spec{
			Name: "ZooKeeper",
			Path: s.java,
			Args: []string{
				"-Xmx256m",
				"-Dzookeeper.admin.enableServer=false",
				"-Dzookeeper.4lw.commands.whitelist=*",
				"-Dzookeeper.log.dir=" + s.Dir,
				"-cp", ConfDir + ":" + s.jar,
				"org.apache.zookeeper.server.ZooKeeperServerMain", cfg,
			},
			Dir:     s.Dir,
			LogFile: filepath.Join(s.Dir, "server.log"),
		})
	} else {
		err = s.proc.Restart()
	}
	if err != nil {
		return err
	}

	if err := s.waitReady(s.proc.Exited()); err != nil {
		s.kill()
		s.proc = nil // the next attempt may use another port
		return fmt.Errorf("ZooKeeper on port %d: %w\n%s", s.Port, err, s.logs())
	}
	return nil
}

// waitReady polls `srvr` until the server answers it, exits, or startTimeout passes.
func (s *Server) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	var err error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited before answering srvr")
		default:
		}
		var answer string
		if answer, err = s.Srvr(); err == nil {
			if strings.Contains(answer, "Mode:") {
				return nil
			}
			err = fmt.Errorf("unexpected srvr answer %q", answer)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("did not answer srvr within %s: %w", startTimeout, err)
}

// fourLetterWord sends a four-letter word and reads the answer until the server closes.
func fourLetterWord(addr, word string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// kill kills the process and waits for it.
func (s *Server) kill() {
	if s.proc == nil {
		return
	}
	if err := s.proc.Kill(); err != nil {
		s.t.Errorf("zktest: %v", err)
	}
}

func (s *Server) cleanup() { s.kill() }

// logs returns the end of the server's log, for failure messages.
func (s *Server) logs() string { return proc.FileTail(filepath.Join(s.Dir, "server.log"), 4000) }

// binaries finds java and zookeeper.jar or fails the test with the command that installs them.
func binaries(t testing.TB) (java, jar string) {
	t.Helper()
	jar = DefaultJar
	if p := os.Getenv("ZK_JAR"); p != "" {
		jar = p
	}
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("zktest: the ZooKeeper server is not installed (%v). "+
			"These tests run against a real ZooKeeper and never skip. Install it with:\n\t%s", err, InstallCommand)
	}
	java = os.Getenv("JAVA")
	if java == "" {
		p, err := exec.LookPath("java")
		if err != nil {
			t.Fatalf("zktest: java is not on PATH (%v); the zookeeper package depends on a JRE. Install it with:\n\t%s", err, InstallCommand)
		}
		java = p
	}
	return java, jar
}
