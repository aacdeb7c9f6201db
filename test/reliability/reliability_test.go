//go:build reliability

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

package reliability

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockwarden/lockwarden/internal/testutil/etcdtest"
	"github.com/lockwarden/lockwarden/internal/testutil/redistest"
)

var (
	setFlag      = flag.String("set", "smoke", "scenario set: smoke or full")
	seedFlag     = flag.Uint64("seed", 0, "seed of the workload and fault plans; 0 picks one (printed)")
	scenarioFlag = flag.String("scenario", "", "run only scenarios whose name matches this regexp")
	docFlag      = flag.String("doc", "", "write the results table between the markers of this file (docs/reliability.md)")
	stopFlag     = flag.Bool("stop-on-failure", false, "run no scenario after the first that fails (a soak: the failing seed is what matters)")
	shardFlag    = flag.String("shard", "0/1", "run only the scenarios of shard i of n (i/n: those whose place in the set is i modulo n), so that n processes, each with servers of its own, share a set")
)

const (
	// defaultTTL is the lock lease of most scenarios, the API's minimum, so that runs are quick.
	defaultTTL = 5 * time.Second
	// leLease is the manager's default leader-election lease (--leader-election-lease-duration):
	// a standby takes over at most about this long after the leader stops renewing.
	leLease = 15 * time.Second
	// samplePeriod is how often the sampler compares Held claims with the backend.
	samplePeriod = 250 * time.Millisecond
	// sampleMargin: a claim whose expireTime is less than this ahead may have lost its backend
	// key legitimately (its renewals fail); such samples are not counted (see CheckBackendSamples).
	sampleMargin = time.Second
)

func TestReliability(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64() % 1_000_000
	}
	t.Logf("seed %d (replay with -seed %d)", seed, seed)
	var scenarios []scenario
	switch *setFlag {
	case "smoke":
		scenarios = smokeScenarios()
	case "full":
		scenarios = fullScenarios()
	case "mutants":
		scenarios = mutantScenarios()
	default:
		t.Fatalf("-set must be smoke, full or mutants, not %q", *setFlag)
	}
	match := regexp.MustCompile(*scenarioFlag)
	shard, shards, err := ParseShard(*shardFlag)
	if err != nil {
		t.Fatal(err)
	}
	if shards > 1 && *docFlag != "" {
		t.Fatal("a shard of a set writes no table: -doc needs the whole set (-shard 0/1)")
	}
	// A scenario's place in the set, not in the shard, seeds it: a shard replays alone as it ran.
	selected := func(i int, s scenario) bool { return i%shards == shard && match.MatchString(s.id()) }
	needs := map[string]bool{}
	for i, s := range scenarios {
		if selected(i, s) {
			needs[s.backend] = true
		}
	}

	e := startEnv(t)
	srv := startServers(t, needs)

	var results []Result
	var mutants []MutantResult
	for i, s := range scenarios {
		id := s.id()
		if !selected(i, s) {
			continue
		}
		if *stopFlag && t.Failed() {
			t.Logf("stopping after the first failure (-stop-on-failure): %s and the scenarios after it did not run", id)
			break
		}
		// Each scenario's seed derives from the run's seed and its place, so that one scenario
		// replays alone with -scenario and the same -seed.
		sseed := seed*1000 + uint64(i)
		t.Run(id, func(t *testing.T) {
			r := runScenario(t, e, srv, s, sseed)
			if s.mutant != "" {
				// A deliberately broken manager: the run must fail, and the table says which
				// checkers failed it.
				m := mutantResult(s, r, sseed)
				mutants = append(mutants, m)
				t.Logf("mutant %s caught by %v", s.mutant, m.Caught)
				for _, v := range r.Violations {
					t.Logf("  %s", v)
				}
				if !slices.Contains(m.Caught, s.expect) {
					t.Errorf("mutant %s survived scenario %s seed %d: checker %s did not fail the run (caught by %v)", s.mutant, m.Scenario, sseed, s.expect, m.Caught)
				}
				return
			}
			results = append(results, r)
			if !r.Passed() {
				var problems []string
				for _, v := range r.Violations {
					problems = append(problems, v.String())
				}
				problems = append(append(append(problems, r.Liveness.Stuck...), r.Orphans...), r.Unmet()...)
				t.Errorf("scenario %s seed %d failed: %d safety violations, porcupine %s, %d stuck, %d orphaned, valid %v\n%s",
					id, sseed, r.Safety(), r.Linearizable, len(r.Liveness.Stuck), len(r.Orphans), r.Valid, strings.Join(problems, "\n"))
			}
		})
	}
	writeTables(t, seed, results, mutants)
}

// startServers starts the backend servers that the scenarios to run need, each with a direct
// client.
func startServers(t *testing.T, needs map[string]bool) *servers {
	srv := &servers{}
	if needs["redis"] {
		goredis.SetLogger(quietLogger{}) // the direct client's dial errors while Redis is down are expected
		srv.redis = redistest.Start(t, redistest.Options{})
		srv.redisClient = srv.redis.Client()
	}
	if needs["etcd"] {
		srv.etcd = etcdtest.Start(t)
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.etcd.Endpoint()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		srv.etcdClient = c
	}

	srv.startOthers(t, needs)
	return srv
}

// mutantResult is the table row of a mutant's run: which checkers caught it, and an example of
// what the expected one found.
func mutantResult(s scenario, r Result, sseed uint64) MutantResult {
	m := MutantResult{Mutant: s.mutant, Scenario: s.backend + "/" + s.name, Seed: sseed, Expect: s.expect, Caught: r.Caught(), Duration: r.Duration}
	for _, v := range r.Violations {
		if v.Checker == s.expect {
			m.Example = v.String()
			break
		}
	}
	if m.Example == "" && s.expect == "stuck" && len(r.Liveness.Stuck) > 0 {
		m.Example = "stuck: " + r.Liveness.Stuck[0] + " still waiting at the end of the run"
	}
	if m.Example == "" && s.expect == "no-loss" && r.NoLossRequired && r.Lost > 0 {
		m.Example = fmt.Sprintf("no-loss: %d held lock(s) lost, none allowed", r.Lost)
	}
	return m
}

// writeTables logs and prints the results table and the mutants table, and writes each into
// the -doc file (the mutants table only for the mutants set).
func writeTables(t *testing.T, seed uint64, results []Result, mutants []MutantResult) {
	stamp := fmt.Sprintf("Set `%s`, seed %d, generated %s on %d CPUs.", *setFlag, seed, time.Now().UTC().Format(time.DateOnly), numCPU())
	if len(results) > 0 {
		table := Table(results)
		t.Logf("results (seed %d):\n%s", seed, table)
		fmt.Println(table)
		if *docFlag != "" {
			if err := WriteBetweenMarkers(*docFlag, stamp+"\n\n"+table); err != nil {
				t.Errorf("writing %s: %v", *docFlag, err)
			}
		}
	}
	if len(mutants) > 0 {
		mt := MutantTable(mutants)
		t.Logf("mutants (seed %d):\n%s", seed, mt)
		fmt.Println(mt)
		if *docFlag != "" && *setFlag == "mutants" {
			if err := WriteBetween(*docFlag, BeginMutantMarker, EndMutantMarker, stamp+"\n\n"+mt); err != nil {
				t.Errorf("writing %s: %v", *docFlag, err)
			}
		}
	}
}

// quietLogger drops go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// servers are the real backend servers, shared by the scenarios, with direct (unproxied)
// clients for the sampler.
type servers struct {
	redis       *redistest.Server
	redisClient *goredis.Client
	etcd        *etcdtest.Member
	etcdClient  *clientv3.Client
	otherServers
}

func numCPU() int { return runtime.NumCPU() }
