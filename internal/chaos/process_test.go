package chaos

// Process and database faults against node processes: kill -9 at random and at the
// crash points of core, database restarts, server-side connection kills, and a proxy
// that blackholes or resets connections. Each scenario runs writers and recording
// listeners in node processes, injects its fault until the fault phase ends (short in
// CI, minutes with OUTBOX_CHAOS_LONG=1 or OUTBOX_CHAOS_DURATION), drains, and gates the
// run with Report.Gate.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// stopTook finds the outbox's stop time in a node's last stderr line.
var stopTook = regexp.MustCompile(`outbox stopped in (\S+)\)`)

// Short-tier settings.
const (
	// queryTimeout is the bound the poller and the purger put on each query (the
	// outbox's default, not configurable).
	queryTimeout = 10 * time.Second
	// stopBound bounds Outbox.Stop while the database is unreachable: the purger's and
	// the poller's running statements (stopped one after the other, each bounded by
	// the query timeout, 10 s) and the dispatcher's last status updates.
	stopBound       = 2*queryTimeout + 5*time.Second
	shortFaultPhase = 3 * time.Second
	// drainCap ends a drain that still makes progress but would outlast the test's
	// timeout; it is a failure too. The gate that matters is drainStall's.
	drainCap = 20 * time.Minute
)

// faultBound bounds, in the scenarios with database or network faults, both the
// recovery time after the database came back and the longest gap without a delivery
// while work waited (the database up). It is derived from the "fault" timing: a call
// caught by the fault ends by its deadline (the query timeout, the longest), a claim its
// node held expires (ClaimTTL), the event's attempt and its status update end by their
// timeouts, and the next poll finds it; doubled, plus 15 s, for a loaded 2-core host
// running under -race. A call without a deadline, or a node that never reconnects,
// exceeds it (or fails the drain).
func faultBound() time.Duration {
	return waitBound("fault")
}

// waitBound is faultBound for the named timing: the longest a node can leave work
// waiting, by its configuration, before something of it finishes.
func waitBound(timing string) time.Duration {
	tm := Timings[timing]
	return 2*(queryTimeout+tm.ClaimTTL+tm.Listener+tm.Status+tm.Poll) + 15*time.Second
}

// inFlightPerNode is how many events one node (node.go's configuration: the default
// Workers and queue sizes; PollBatchSize 100 fits in the cold queue) can hold between
// claiming or queueing them and the durable DONE: queued in the hot and cold queues,
// running in a worker, or delivered with DONE not yet written. Only these can be
// delivered again after a database fault.
const inFlightPerNode = outbox.DefaultWorkers + outbox.DefaultHotQueueSize + outbox.DefaultColdQueueSize

// gateDatabaseFault gates a database- or network-fault scenario beyond Report.Gate:
// duplicates at most the events in flight at each fault on every node, and recovery and
// longest gap within faultBound.
func gateDatabaseFault(t *testing.T, c *cluster, rep Report) {
	t.Helper()
	faults := c.faultCount()
	bound := faults * c.cfg.nodes * inFlightPerNode
	rep.GateDuplicates(t, bound, fmt.Sprintf("%d faults × %d nodes × (Workers %d + hot queue %d + cold queue %d)",
		faults, c.cfg.nodes, outbox.DefaultWorkers, outbox.DefaultHotQueueSize, outbox.DefaultColdQueueSize))
	rep.GateTimes(t, faultBound(), "2 × (query timeout + ClaimTTL + listener and status timeouts + poll interval) + 15 s")
}

// nodesFor is the number of node processes: MultiNode clusters for the servers, one
// SingleNode process for SQLite.
func nodesFor(dialect string) int {
	if dialect == "sqlite" {
		return 1
	}
	if Long() {
		return 3
	}
	return 2
}

// between returns a random duration in [lo, hi).
func between(c *cluster, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rng.Int64N(int64(hi-lo)))
}

// orderKeys is how many order keys the writers of an ordered scenario use: few enough
// that every key has several events pending at once (WAITING rows, promotes, late
// commits that same-key writers wait for), enough that the workers run many keys at once.
const orderKeys = 24

// TestProcessFaults: without faults (the baseline: no duplicates allowed), and with
// nodes killed by SIGKILL at random times and restarted; each also with ordered events.
// The ordered scenarios add a listener that fails for some keys (transiently for some,
// permanently for others) and, on the servers, nodes joining and leaving (1 → 3 → 1).
func TestProcessFaults(t *testing.T) {
	t.Parallel()
	for _, db := range allTargets {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			for _, ordered := range []bool{false, true} {
				prefix, keys := "", 0
				if ordered {
					prefix, keys = "ordered/", orderKeys
				}
				t.Run(prefix+"no-faults", func(t *testing.T) {
					cfg := openTarget(t, db)
					cfg.seed, cfg.nodes, cfg.writers, cfg.timing, cfg.orderKeys = Seed(t), nodesFor(db), 2, "steady", keys
					c := newCluster(t, cfg)
					time.Sleep(Duration(t, shortFaultPhase))
					c.finish(prefix+"no-faults", true)
				})
				t.Run(prefix+"kill-random", func(t *testing.T) {
					cfg := openTarget(t, db)
					cfg.seed, cfg.nodes, cfg.writers, cfg.timing, cfg.orderKeys = Seed(t), nodesFor(db), 2, "fault", keys
					c := newCluster(t, cfg)
					end := time.Now().Add(Duration(t, shortFaultPhase))
					for time.Now().Before(end) {
						c.sleep(between(c, 300*time.Millisecond, 1500*time.Millisecond), false)
						slot := c.rng.IntN(cfg.nodes)
						c.kill(slot)
						c.sleep(between(c, 0, 500*time.Millisecond), false)
						c.start(slot)
					}
					c.finish(prefix+"kill-random", false)
				})
			}
			t.Run("ordered/listener-failures", func(t *testing.T) {
				cfg := openTarget(t, db)
				cfg.seed, cfg.nodes, cfg.writers, cfg.timing = Seed(t), nodesFor(db), 2, "fault"
				cfg.orderKeys, cfg.failures = orderKeys, true
				c := newCluster(t, cfg)
				c.sleep(Duration(t, shortFaultPhase), false)
				rep := c.finish("ordered/listener-failures", false)
				// One event in twenty fails for good (a quarter of the keys, one ID in
				// five): with fewer than 150 events none may have been chosen (about 4 %
				// of runs with 63), so the check needs enough events to mean something.
				if rep.Dead == 0 && rep.Committed < 150 {
					t.Logf("no event ended DEAD, with %d events committed: not asserted (one in twenty fails for good)", rep.Committed)
				} else if rep.Dead == 0 {
					t.Errorf("no event ended DEAD: the permanent failures never happened")
				}
			})
			// Fan-out: three listeners take every event, the second limited (one worker
			// per node, 400 events per second), the last failing each delivery's first
			// attempt, while nodes are killed: every delivery is delivered, none lost,
			// none run again after its success was recorded beyond the at-least-once
			// window the gate allows. Meanwhile the second or the last subscription is
			// paused and resumed again and again (never the first, never two at once),
			// through nodes the kills may hit mid-call: no attempt of a paused one starts
			// past the pause bound (CheckPause), and its deliveries follow the resume.
			// Twice the usual short phase, so that CI sees a pause or two. Also with
			// ordered events: each delivery is ordered in its event's key and subscription
			// (a paused subscription's keys wait, the others' go on).
			for _, ordered := range []bool{false, true} {
				prefix, keys := "", 0
				if ordered {
					prefix, keys = "ordered/", orderKeys
				}
				t.Run(prefix+"fan-out/kill-random", func(t *testing.T) {
					cfg := openTarget(t, db)
					cfg.seed, cfg.nodes, cfg.writers, cfg.timing, cfg.fanOut = Seed(t), nodesFor(db), 2, "fault", 3
					cfg.orderKeys = keys
					c := newCluster(t, cfg)
					pz := c.startPauser([]string{FanOutListener(1), FanOutListener(2)})
					end := time.Now().Add(Duration(t, 2*shortFaultPhase))
					for time.Now().Before(end) {
						c.sleep(between(c, 300*time.Millisecond, 1500*time.Millisecond), false)
						slot := c.rng.IntN(cfg.nodes)
						c.kill(slot)
						c.sleep(between(c, 0, 500*time.Millisecond), false)
						c.start(slot)
					}
					pz.stopAndResume()
					c.finish(prefix+"fan-out/kill-random", false)
				})
			}
			if db == "sqlite" {
				return // one SingleNode process: no node joins or leaves
			}
			t.Run("ordered/nodes-1-3-1", func(t *testing.T) {
				cfg := openTarget(t, db)
				cfg.seed, cfg.nodes, cfg.initial, cfg.writers, cfg.timing = Seed(t), 3, 1, 2, "fault"
				cfg.orderKeys = orderKeys
				c := newCluster(t, cfg)
				phase := Duration(t, shortFaultPhase)
				c.sleep(phase/3, false)
				c.join(1)
				c.join(2)
				c.sleep(phase/3, false)
				// One leaves gracefully, one is killed: its keys move to the node left.
				c.leave(1, false)
				c.leave(2, true)
				c.sleep(phase/3, false)
				c.finish("ordered/nodes-1-3-1", false)
			})
		})
	}
}

// crashPoints are the crash points of core and where they apply: after-claim needs
// claims (MultiNode, the servers).
var crashPoints = []struct {
	name string
	on   []string
	max  int // OUTBOX_CRASH_AFTER is drawn from [1, max]
}{
	{"after-claim", []string{"postgres", "mysql"}, 5},
	{"after-listener", allTargets, 100},
	{"after-insert", allTargets, 100},
}

// TestCrashPoints kills nodes at the exact crash points of core: a node built with
// -tags outboxchaos kills itself (SIGKILL) at the n-th hit of the point, n random, and
// is restarted at once, again and again until the fault phase ends.
func TestCrashPoints(t *testing.T) {
	t.Parallel()
	exe := nodeBinary(t, t.TempDir())
	for _, db := range allTargets {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			for _, cp := range crashPoints {
				for _, ordered := range []bool{false, true} {
					if !slices.Contains(cp.on, db) {
						continue
					}
					prefix, keys := "", 0
					if ordered {
						prefix, keys = "ordered/", orderKeys
					}
					t.Run(prefix+cp.name, func(t *testing.T) {
						cfg := openTarget(t, db)
						cfg.seed, cfg.nodes, cfg.writers, cfg.timing, cfg.exe = Seed(t), nodesFor(db), 2, "fault", exe
						cfg.orderKeys = keys
						rng := Rand(cfg.seed + 1)
						cfg.env = func(slot, inc int) []string {
							return []string{"OUTBOX_CRASH_POINT=" + cp.name,
								"OUTBOX_CRASH_AFTER=" + strconv.Itoa(1+rng.IntN(cp.max))}
						}
						c := newCluster(t, cfg)
						c.sleep(Duration(t, shortFaultPhase), true)
						// Every node crashes at least once: wait for the first crash if none came yet.
						for deadline := time.Now().Add(30 * time.Second); c.faultCount() == 0 && time.Now().Before(deadline); {
							c.sleep(100*time.Millisecond, true)
						}
						if c.faultCount() == 0 {
							t.Errorf("crash point %s was never hit", cp.name)
						}
						c.finish(prefix+"crash-"+cp.name, false)
					})
				}
			}
		})
	}
}

// TestServerFaults restarts the database server under load and kills the nodes'
// connections from the server side, on a server of this test's own (a restart of a
// shared server would hit other packages' tests): PostgreSQL stopped with pg_ctl stop
// -m immediate and -m fast, MariaDB killed with SIGKILL, each then started again on the
// same data dir and port.
func TestServerFaults(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"postgres": {"db-restart-immediate", "db-restart-fast", "conn-kill", "ordered/db-restart-immediate"},
		"mysql":    {"db-kill-restart", "conn-kill", "ordered/db-kill-restart"},
	}
	for _, db := range []string{"postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			s := StartServer(t, db)
			for _, scenario := range cases[db] {
				t.Run(scenario, func(t *testing.T) {
					fault, ordered := strings.CutPrefix(scenario, "ordered/")
					if s.Failed != nil { // an earlier scenario's restart left the server down
						Publish(t, Result{Kind: KindScenario, Scenario: scenario, Database: db, Ordered: ordered,
							Infra: "not run, the server is down: " + s.Failed.Result()})
						t.Fatalf("infra: not run, the server is down: %s", s.Failed.Result())
					}
					cfg := openServerTarget(t, s)
					cfg.seed, cfg.nodes, cfg.writers, cfg.timing = Seed(t), nodesFor(db), 2, "fault"
					if ordered {
						cfg.orderKeys = orderKeys
					}
					c := newCluster(t, cfg)
					end := time.Now().Add(Duration(t, shortFaultPhase))
					for time.Now().Before(end) {
						c.sleep(between(c, 500*time.Millisecond, 2*time.Second), false)
						switch fault {
						case "conn-kill":
							n := killConnections(t, c)
							c.note(Fault, "", fmt.Sprintf("server killed %d connections", n))
						default:
							mode := map[string]string{"db-restart-immediate": "immediate", "db-restart-fast": "fast",
								"db-kill-restart": "kill"}[fault]
							c.note(Down, "", "stop -m "+mode)
							if err := s.Stop(mode); err != nil {
								t.Fatalf("stop: %v", err)
							}
							time.Sleep(between(c, 200*time.Millisecond, 1500*time.Millisecond))
							if err := s.Start(); err != nil {
								if ie := (*InfraError)(nil); errors.As(err, &ie) {
									c.infraFailure(scenario, ie)
								}
								t.Fatalf("start: %v", err)
							}
							c.note(Up, "", "started")
						}
					}
					rep := c.finish(scenario, false)
					if rep.Restarts > 0 {
						t.Logf("recovery after a restart: at most %s", rep.Recovery.Round(time.Millisecond))
					}
					gateDatabaseFault(t, c, rep)
				})
			}
			// Last, since it leaves the server broken: a restart the server cannot
			// recover from is an InfraError carrying the server's log.
			t.Run("recovery-failure-is-infra", func(t *testing.T) { testRecoveryFailureIsInfra(t, s) })
		})
	}
}

// testRecoveryFailureIsInfra crashes the server, damages what its crash recovery starts
// from (PostgreSQL's control file, the header of MariaDB's redo log) and checks that
// Start reports an InfraError whose log excerpt holds the server's error lines: what a
// scenario publishes as Result.Infra and fails with as "infra: …", apart from the gates.
func testRecoveryFailureIsInfra(t *testing.T, s *Server) {
	mode, damaged, want := "immediate", "data/global/pg_control", "FATAL"
	if s.Kind == "mysql" {
		mode, damaged, want = "kill", "data/ib_logfile0", "[ERROR]"
	}
	if err := s.Stop(mode); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, damaged), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, 8192), 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start()
	var ie *InfraError
	if !errors.As(err, &ie) || ie.What != "server failed crash recovery" || !strings.Contains(ie.Log, want) {
		t.Fatalf("Start on a damaged %s = %v; want an InfraError, server failed crash recovery, with %q in its log", damaged, err, want)
	}
	if s.Failed != ie || !strings.HasPrefix(ie.Error(), "infra: server failed crash recovery: ") {
		t.Errorf("Server.Failed = %v, error %q", s.Failed, ie.Error())
	}
	t.Logf("reported as: %v", ie)
}

// killConnections kills every client connection of the cluster's server but the one
// running the statement, and returns how many.
func killConnections(t *testing.T, c *cluster) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := c.cfg.db.Conn(ctx)
	if err != nil {
		t.Fatalf("conn: %v", err)
	}
	defer conn.Close()
	switch c.cfg.dialect {
	case "postgres":
		var n int
		err := conn.QueryRowContext(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database()`).Scan(&n)
		if err != nil {
			t.Fatalf("pg_terminate_backend: %v", err)
		}
		return n
	default:
		rows, err := conn.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST
			WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ('Daemon', 'Killed') AND USER = 'root'`)
		if err != nil {
			t.Fatalf("processlist: %v", err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		n := 0
		for _, id := range ids {
			if _, err := conn.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err == nil {
				n++
			}
		}
		return n
	}
}

// TestNetworkFaults puts a TCP proxy between the nodes and the shared server. Blackhole:
// every connection goes silent for longer than the library's timeouts, and stays dead
// afterwards, so that only the library's deadlines can free a call waiting on it;
// delivery must resume within a bound once the network heals, and every node must
// stop gracefully: nothing hangs. Reset: every connection is aborted with a TCP reset.
func TestNetworkFaults(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			for _, scenario := range []string{"proxy-blackhole", "proxy-reset"} {
				t.Run(scenario, func(t *testing.T) {
					cfg := openTarget(t, db)
					p, err := NewProxy(HostPort(cfg.dsn))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { p.Close() })
					cfg.nodeDSN = WithHostPort(cfg.dsn, p.Addr())
					cfg.seed, cfg.nodes, cfg.writers, cfg.timing = Seed(t), nodesFor(db), 2, "fault"
					c := newCluster(t, cfg)
					end := time.Now().Add(Duration(t, shortFaultPhase))
					for first := true; time.Now().Before(end); first = false {
						c.sleep(between(c, 500*time.Millisecond, 2*time.Second), false)
						switch scenario {
						case "proxy-blackhole":
							c.note(Down, "", "blackhole")
							p.Blackhole()
							cut, stopped := time.Now(), -1
							if first {
								// A graceful stop while the network is cut returns within
								// its deadlines: Stop waits for no call without one.
								time.Sleep(time.Second) // statements are waiting on the cut connections
								slot := c.rng.IntN(cfg.nodes)
								took, err := c.stopNode(slot, 2*stopBound)
								if err != nil {
									t.Errorf("graceful stop during the blackhole: %v", err)
								} else {
									line := lastLine(c.stderrOf(slot))
									t.Logf("graceful stop during the blackhole: %s in all; %s", took.Round(time.Millisecond), line)
									if m := stopTook.FindStringSubmatch(line); m == nil {
										t.Errorf("no stop time in %q", line)
									} else if d, _ := time.ParseDuration(m[1]); d > stopBound {
										t.Errorf("outbox Stop during the blackhole took %s, want within %s", d, stopBound)
									}
								}
								stopped = slot
							}
							time.Sleep(time.Until(cut.Add(between(c, 2*time.Second, 4*time.Second))))
							p.Heal()
							c.note(Up, "", "healed")
							if stopped >= 0 {
								c.start(stopped)
							}
						case "proxy-reset":
							n := p.Reset()
							c.note(Fault, "", fmt.Sprintf("reset %d connections", n))
						}
					}
					rep := c.finish(scenario, false)
					gateDatabaseFault(t, c, rep)
					// Every call has a deadline: once the network heals, the outage's backlog
					// is delivered within a few of the longest of them (the poller's query
					// timeout, 10 s: each connection the pool hands out that died in the
					// blackhole costs one) plus a claim TTL, with room for a loaded machine.
					// A call without a deadline would never return (and the drain fail).
					if bound := 3*queryTimeout + 15*time.Second; rep.Recovery > bound {
						t.Errorf("delivery resumed %s after the network healed, want within %s: a call without a deadline?",
							rep.Recovery.Round(time.Millisecond), bound)
					}
				})
			}
		})
	}
}
