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

// Package redisnode is the lock protocol that lockwarden speaks with one Redis server, shared by
// the redis backend (one server) and the redlock backend (a quorum of independent servers), so
// that both write keys in the same form.
//
// # Keys
//
// A lock is one string key whose value is the holder identity, written with the standard
// `SET key identity NX PX ttl`. Any other client that takes locks with SET NX on the same key
// (redsync, Redisson's plain locks, a shell script) is therefore excluded by lockwarden's holders
// and excludes them, and a restarted controller resumes a hold knowing only its identity.
//
// Beside it, RecordKey(key) holds the hold record "<acquire time, unix ms>:<hold id>:<identity>"
// with the same TTL, so that a reentrant acquire, a new session and Inspect can report when the
// hold began (Lease.AcquireTime) and which hold it is (Lease.Version, the random hold id). Only
// the lock key decides who holds the lock: a record is trusted only while it names the key's
// holder.
//
// A lock held in shared places turns the same key into a sorted set of places (places.go), so
// that the key exists, and refuses SET NX, exactly while a place or an exclusive hold is live.
//
// # Scripts
//
// Acquiring, renewing, releasing and inspecting are Lua scripts (the .lua files beside this one),
// so each is atomic on the server and checks the owner before writing: a release or renewal never
// touches a key that another identity holds. Renewal of any number of holds, exclusive and shared
// alike, is one pipeline: the renewal scripts run over chunks of holds, all sent in one round
// trip.
package redisnode

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	_ "embed" // the Lua scripts
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RecordKeyPrefix starts the key of every hold record: RecordKey(key) = RecordKeyPrefix + key.
const RecordKeyPrefix = "lockwarden-hold:"

// renewChunk is how many holds one run of the renewal script extends, so that a huge batch does
// not block the server in one long script; the chunks still travel in one pipeline.
const renewChunk = 500

// pingTTL is the TTL of Ping's probe key, in case its DEL does not arrive.
const pingTTL = time.Minute

var (
	//go:embed acquire.lua
	acquireSource string
	//go:embed renew.lua
	renewSource string
	//go:embed release.lua
	releaseSource string
	//go:embed inspect.lua
	inspectBody   string
	inspectSource = placesLib + inspectBody
)

// RecordKey returns the key of key's hold record.
func RecordKey(key string) string { return RecordKeyPrefix + key }

// Record describes one hold: who holds the lock, since when, and which hold it is.
type Record struct {
	// AcquireTime is when the hold began, to the millisecond.
	AcquireTime time.Time
	// HoldID is random per hold; the backends report it as Lease.Version.
	HoldID string
	// Identity is the holder identity.
	Identity string
}

// NewRecord returns the record of a hold that identity begins at now, with a fresh hold id.
func NewRecord(now time.Time, identity string) Record {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return Record{AcquireTime: time.UnixMilli(now.UnixMilli()), HoldID: hex.EncodeToString(b), Identity: identity}
}

// String is the record as stored.
func (r Record) String() string {
	return strconv.FormatInt(r.AcquireTime.UnixMilli(), 10) + ":" + r.HoldID + ":" + r.Identity
}

// ParseRecord reads a stored record.
func ParseRecord(s string) (Record, bool) {
	ms, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Record{}, false
	}
	id, identity, ok := strings.Cut(rest, ":")
	if !ok || id == "" {
		return Record{}, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return Record{}, false
	}
	if _, err := hex.DecodeString(id); err != nil {
		return Record{}, false
	}
	return Record{AcquireTime: time.UnixMilli(n), HoldID: id, Identity: identity}, true
}

// Config says how to reach one Redis server.
type Config struct {
	// Address is host:port.
	Address string
	// DB is the logical database.
	DB int
	// Password is sent with AUTH when set.
	Password string
	// TLS turns on TLS when set.
	TLS *tls.Config
}

// Node is a connection pool to one Redis server that speaks the lock protocol. Every method sends
// one request (a script run, a transaction or a pipeline; Ping two; a script the server has not
// cached yet, as after a restart, one more), bounded by the caller's context. It is safe for
// concurrent use.
type Node struct {
	addr     string
	password string
	tls      bool
	client   *goredis.Client
	acquire  *goredis.Script
	release  *goredis.Script
	inspect  *goredis.Script
	// The scripts of shared places (places.go).
	acquireShared *goredis.Script
	releaseShared *goredis.Script
	// requests counts the requests the methods send.
	requests *atomic.Int64
}

// New returns a Node for cfg. It does not connect: the first request does. Each request its
// methods send (a command, a script run or a pipeline; connection handshakes aside) is counted in
// requests.
func New(cfg Config, requests *atomic.Int64) *Node {
	var tlsConfig *tls.Config
	if cfg.TLS != nil {
		tlsConfig = cfg.TLS.Clone()
	}
	client := goredis.NewClient(&goredis.Options{
		Addr:       cfg.Address,
		DB:         cfg.DB,
		Password:   cfg.Password,
		TLSConfig:  tlsConfig,
		ClientName: "lockwarden",
		// RESP2: every Redis since 2.6, Valkey and proxies speak it, and the protocol needs nothing
		// from RESP3.
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		// Every request carries the caller's deadline, far below any TTL; these are ceilings for a
		// caller that forgot one.
		ContextTimeoutEnabled: true,
		DialTimeout:           5 * time.Second,
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
		// One dial per attempt: a dead server fails the call at once instead of after retries.
		DialerRetries: 1,
		// One retry, on a fresh connection, for a pooled connection that died with a restarted
		// server. Every script is idempotent for its identity, so a retried write does no harm.
		MaxRetries: 1,
	})
	return &Node{
		addr:     cfg.Address,
		password: cfg.Password,
		tls:      cfg.TLS != nil,
		client:   client,
		acquire:  goredis.NewScript(acquireSource),
		release:  goredis.NewScript(releaseSource),
		inspect:  goredis.NewScript(inspectSource),
		requests: requests,

		acquireShared: goredis.NewScript(acquireSharedSource),
		releaseShared: goredis.NewScript(releaseSharedSource),
	}
}

// Addr is the server's address.
func (n *Node) Addr() string { return n.addr }

// Close closes the connection pool.
func (n *Node) Close() error { return n.client.Close() }

// Outcome is what an acquire found.
type Outcome int

// Outcomes of an acquire.
const (
	// Locked: another value holds the key.
	Locked Outcome = iota
	// Acquired: the key was free and now holds the identity.
	Acquired
	// Refreshed: the identity already held the key; its TTL was reset.
	Refreshed
)

// AcquireResult is the answer of one server to an acquire.
type AcquireResult struct {
	Outcome Outcome
	// Record is the hold's record when Acquired or Refreshed.
	Record Record
	// Holder is the key's value when Locked.
	Holder string
	// PTTL is the key's remaining TTL when Locked; negative when the key has no TTL.
	PTTL time.Duration
	// Places lists the live places (Identity and PTTL only), the first to expire first, when a
	// shared acquire was Locked because every place is taken; Holder and PTTL are then the
	// first's. Nil when the key is held exclusively.
	Places []Place
}

// Acquire takes key for rec.Identity with ttl, or refreshes the identity's hold. rec is the
// record a new hold gets.
func (n *Node) Acquire(ctx context.Context, key string, ttl time.Duration, rec Record) (AcquireResult, error) {
	start := time.Now()
	reply, err := n.run(ctx, n.acquire, []string{key, RecordKey(key)}, rec.Identity, millis(ttl), rec.String()).Slice()
	if err != nil {
		return AcquireResult{}, n.fail(ctx, start, "acquire "+strconv.Quote(key), err)
	}
	res, err := parseAcquire(reply)
	if err != nil {
		return AcquireResult{}, n.fail(ctx, start, "acquire "+strconv.Quote(key), err)
	}
	return res, nil
}

// Claim is a hold that a pipelined call acts on.
type Claim struct {
	// Key is the lock key.
	Key string
	// Record is the hold's record; its Identity is the holder.
	Record Record
	// Shared: the hold is a place of key (places.go), not its exclusive hold.
	Shared bool
}

func parseAcquire(reply []any) (AcquireResult, error) {
	if len(reply) < 2 {
		return AcquireResult{}, fmt.Errorf("unexpected reply %v from the acquire script", reply)
	}
	code, _ := reply[0].(int64)
	text, _ := reply[1].(string)
	switch code {
	case 1, 2:
		rec, ok := ParseRecord(text)
		if !ok {
			return AcquireResult{}, fmt.Errorf("unreadable hold record %q", text)
		}
		out := Acquired
		if code == 2 {
			out = Refreshed
		}
		return AcquireResult{Outcome: out, Record: rec}, nil
	case 0:
		res := AcquireResult{Outcome: Locked, Holder: text, PTTL: -1}
		if len(reply) > 2 {
			if ms, ok := reply[2].(int64); ok && ms >= 0 {
				res.PTTL = time.Duration(ms) * time.Millisecond
			}
		}
		return res, nil
	}
	return AcquireResult{}, fmt.Errorf("unexpected reply %v from the acquire script", reply)
}

// Renewal is one server's answer about one claim of Renew.
type Renewal struct {
	// Held: the claim's identity held it (its place, for a shared claim), and its TTL was reset.
	Held bool
	// Places is the number of places a held shared claim was last taken under; zero for an
	// exclusive claim, and for a place whose record is missing.
	Places int
}

// Renew resets the TTL of every claim whose identity still holds its key (or, for a shared claim,
// a live place of it), in one pipeline, and reports per claim whether it did. A key that is free
// or held by another value, and a place that is free or expired, is left alone.
func (n *Node) Renew(ctx context.Context, claims []Claim, ttl time.Duration) ([]Renewal, error) {
	start := time.Now()
	var exclusive, shared []int // indexes into claims
	for i, c := range claims {
		if c.Shared {
			shared = append(shared, i)
		} else {
			exclusive = append(exclusive, i)
		}
	}
	pipe := n.client.Pipeline()
	type run struct {
		cmd *goredis.Cmd
		// of are the indexes of the claims the run answers for, in order.
		of []int
	}
	var runs []run
	for _, kind := range []struct {
		of     []int
		source string
	}{{exclusive, renewSource}, {shared, renewSharedSource}} {
		for lo := 0; lo < len(kind.of); lo += renewChunk {
			of := kind.of[lo:min(lo+renewChunk, len(kind.of))]
			keys := make([]string, 0, 2*len(of))
			args := make([]any, 0, 1+len(of))
			args = append(args, millis(ttl))
			for _, i := range of {
				c := claims[i]
				second := RecordKey(c.Key)
				if c.Shared {
					second = PlacesKey(c.Key)
				}
				keys = append(keys, c.Key, second)
				args = append(args, c.Record.Identity)
			}
			// EVAL, not EVALSHA: the pipeline stays one round trip even after a restart emptied
			// the server's script cache. The server caches the compiled script all the same.
			runs = append(runs, run{cmd: pipe.Eval(ctx, kind.source, keys, args...), of: of})
		}
	}
	if len(runs) == 0 {
		return nil, nil
	}
	n.requests.Add(1)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, n.fail(ctx, start, "renew", err)
	}
	renewals := make([]Renewal, len(claims))
	for _, r := range runs {
		answers, err := r.cmd.Int64Slice()
		if err != nil {
			return nil, n.fail(ctx, start, "renew", err)
		}
		if len(answers) != len(r.of) {
			return nil, n.fail(ctx, start, "renew", fmt.Errorf("the renewal script answered for %d of %d holds", len(answers), len(r.of)))
		}
		for j, a := range answers {
			c := &renewals[r.of[j]]
			switch {
			case !claims[r.of[j]].Shared:
				c.Held = a == 1
			case a != 0:
				c.Held, c.Places = true, int(max(a, 0))
			}
		}
	}
	return renewals, nil
}

// Settle takes, in one pipeline, every exclusive claim in take whose key is free (as Acquire,
// keeping the claim's record) and releases every claim in drop whose identity holds its key or
// its place (as Release and ReleaseShared). The redlock backend uses it to restore a lock on
// nodes that lost it while a quorum still held it, and to remove what is left of a lock or a
// place that lost its quorum. Shared claims in take are skipped: a place restored without its
// limit could make a server hold more places than the limit. Keys held by another value are left
// alone; outcomes per claim are not reported, err only when the pipeline failed.
func (n *Node) Settle(ctx context.Context, take, drop []Claim, ttl time.Duration) error {
	if len(take) == 0 && len(drop) == 0 {
		return nil
	}
	start := time.Now()
	pipe := n.client.Pipeline()
	sent := 0
	for _, c := range take {
		if c.Shared {
			continue
		}
		pipe.Eval(ctx, acquireSource, []string{c.Key, RecordKey(c.Key)}, c.Record.Identity, millis(ttl), c.Record.String())
		sent++
	}
	for _, c := range drop {
		if c.Shared {
			pipe.Eval(ctx, releaseSharedSource, []string{c.Key, PlacesKey(c.Key)}, c.Record.Identity)
		} else {
			pipe.Eval(ctx, releaseSource, []string{c.Key, RecordKey(c.Key)}, c.Record.Identity)
		}
		sent++
	}
	if sent == 0 {
		return nil
	}
	n.requests.Add(1)
	if _, err := pipe.Exec(ctx); err != nil && !isReplyError(err) {
		return n.fail(ctx, start, "settle", err)
	}
	return nil
}

// ReleaseOutcome is what a release found.
type ReleaseOutcome int

// Outcomes of a release.
const (
	// Released: the identity held the key; it was deleted.
	Released ReleaseOutcome = iota
	// Free: the key was free.
	Free
	// HeldByOther: another value holds the key; it was left alone.
	HeldByOther
)

// ReleaseResult is the answer of one server to a release.
type ReleaseResult struct {
	Outcome ReleaseOutcome
	// Holder is the key's value when HeldByOther.
	Holder string
}

// Release deletes key if identity holds it.
func (n *Node) Release(ctx context.Context, key, identity string) (ReleaseResult, error) {
	start := time.Now()
	reply, err := n.run(ctx, n.release, []string{key, RecordKey(key)}, identity).Slice()
	if err == nil {
		var res ReleaseResult
		if res, err = parseRelease(reply); err == nil {
			return res, nil
		}
	}
	return ReleaseResult{}, n.fail(ctx, start, "release "+strconv.Quote(key), err)
}

func parseRelease(reply []any) (ReleaseResult, error) {
	if len(reply) >= 1 {
		switch code, _ := reply[0].(int64); code {
		case 1:
			return ReleaseResult{Outcome: Released}, nil
		case 0:
			return ReleaseResult{Outcome: Free}, nil
		case -1:
			if len(reply) >= 2 {
				holder, _ := reply[1].(string)
				return ReleaseResult{Outcome: HeldByOther, Holder: holder}, nil
			}
		}
	}
	return ReleaseResult{}, fmt.Errorf("unexpected reply %v from the release script", reply)
}

// Holding is what one server says about a key.
type Holding struct {
	// Holder is the key's value when it is held exclusively; empty when the key is free or held
	// in places.
	Holder string
	// PTTL is the key's remaining TTL; negative when it has none.
	PTTL time.Duration
	// Record is the hold record, when there is one and it names Holder.
	Record Record
	// HasRecord says whether Record is set.
	HasRecord bool
	// Places lists the live places, the first to expire first, when the key is held in shared
	// places.
	Places []Place
}

// Inspect reads who holds key, exclusively (its value, remaining TTL and hold record) or in
// places (each live place with its record), in one script run, so that all of it describes the
// same moment.
func (n *Node) Inspect(ctx context.Context, key string) (Holding, error) {
	start := time.Now()
	reply, err := n.run(ctx, n.inspect, []string{key, RecordKey(key), PlacesKey(key)}).Slice()
	if err == nil {
		var h Holding
		if h, err = parseInspect(reply); err == nil {
			return h, nil
		}
	}
	return Holding{}, n.fail(ctx, start, "inspect "+strconv.Quote(key), err)
}

func parseInspect(reply []any) (Holding, error) {
	if len(reply) == 0 {
		return Holding{}, fmt.Errorf("unexpected reply %v from the inspect script", reply)
	}
	switch code, _ := reply[0].(int64); code {
	case 0:
		return Holding{}, nil
	case 1:
		if len(reply) != 4 {
			break
		}
		holder, _ := reply[1].(string)
		h := Holding{Holder: holder, PTTL: -1}
		if ms, ok := reply[2].(int64); ok && ms >= 0 {
			h.PTTL = time.Duration(ms) * time.Millisecond
		}
		if s, _ := reply[3].(string); s != "" {
			if rec, ok := ParseRecord(s); ok && rec.Identity == holder {
				h.Record, h.HasRecord = rec, true
			}
		}
		return h, nil
	case 2:
		places, err := parsePlaces(reply[1:], 3)
		if err != nil {
			return Holding{}, err
		}
		return Holding{PTTL: -1, Places: places}, nil
	}
	return Holding{}, fmt.Errorf("unexpected reply %v from the inspect script", reply)
}

// Ping checks that the server answers (PING), which also proves the connection's handshake and
// authentication, and that it takes writes (SET of probeKey with a short TTL, then DEL).
func (n *Node) Ping(ctx context.Context, probeKey string) error {
	start := time.Now()
	n.requests.Add(1)
	if err := n.client.Ping(ctx).Err(); err != nil {
		return n.fail(ctx, start, "ping", err)
	}
	start = time.Now()
	n.requests.Add(1)
	_, err := n.client.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		pipe.Set(ctx, probeKey, "lockwarden ping", pingTTL)
		pipe.Del(ctx, probeKey)
		return nil
	})
	if err != nil {
		return n.fail(ctx, start, "write a probe key", err)
	}
	return nil
}

// run runs script by its SHA (EVALSHA), and by its source (EVAL) if the server does not know it
// yet, as after a restart.
func (n *Node) run(ctx context.Context, script *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	n.requests.Add(1)
	cmd := script.EvalSha(ctx, n.client, keys, args...)
	if goredis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		n.requests.Add(1)
		cmd = script.Eval(ctx, n.client, keys, args...)
	}
	return cmd
}

// millis is ttl in whole milliseconds, rounded up so that a key never expires before its TTL.
func millis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// isReplyError says whether err is an error reply of the server to one command of a pipeline,
// which the command carries, rather than a failure of the pipeline.
func isReplyError(err error) bool {
	var re goredis.Error
	return errors.As(err, &re)
}
