package system

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// EnvSeed replays TestChaos with a given seed.
const EnvSeed = "RECONCILER_SYSTEM_SEED"

// TestChaos is hashicorp/raft's fuzzy test with real processes: for 25 s
// it promotes trees while killing (SIGKILL), freezing (SIGSTOP) and
// gracefully restarting (SIGTERM) one random node at a time, with the
// load on all nodes. Then it heals, promotes a last tree, and checks that
// every node converges and that no answer broke an invariant.
func TestChaos(t *testing.T) {
	c := startSystem(t, 3)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(EnvSeed); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s: %v", EnvSeed, err)
		}
	}
	t.Logf("seed %d (replay: %s=%d)", seed, EnvSeed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	chk := NewChecker()
	load := StartLoad(t, c, chk, DefaultLoad)
	ch := &chaos{t: t, c: c, rng: rng}
	for end := time.Now().Add(25 * time.Second); time.Now().Before(end); {
		ch.step()
	}
	t.Logf("chaos: %v", ch.log)
	ch.k++
	c.Promote(ch.k)
	gen := c.WaitServing(ch.k, c.Nodes, 2*harness.PromoteTimeout)
	c.WaitConverged(c.Nodes, gen, harness.PromoteTimeout)
	finish(t, c, load, chk)
}

// chaos holds the state of TestChaos's random walk.
type chaos struct {
	t   *testing.T
	c   *Cluster
	rng *rand.Rand
	k   int // the last tree promoted
	log []string
}

// step does one random action; a disrupted node is back before it returns,
// so the cluster keeps a quorum, and a promotion may happen meanwhile.
func (ch *chaos) step() {
	victim := ch.c.Nodes[ch.rng.IntN(len(ch.c.Nodes))]
	switch ch.rng.IntN(5) {
	case 0, 1:
		ch.promote()
	case 2:
		ch.log = append(ch.log, "kill "+victim.ID)
		ch.c.Kill(victim)
		ch.maybePromote()
		ch.c.Restart(victim)
	case 3:
		ch.log = append(ch.log, "pause "+victim.ID)
		ch.c.Pause(victim)
		ch.maybePromote()
		ch.c.Resume(victim)
	case 4:
		ch.log = append(ch.log, "term "+victim.ID)
		if err := victim.Terminate(15 * time.Second); err != nil {
			ch.t.Errorf("graceful stop: %v", err)
		}
		ch.maybePromote()
		ch.c.Restart(victim)
	}
	ch.sleep(500 * time.Millisecond)
}

func (ch *chaos) promote() {
	ch.k++
	ch.log = append(ch.log, "promote "+strconv.Itoa(ch.k))
	ch.c.Promote(ch.k)
}

// maybePromote promotes a tree half of the time, then waits up to 2 s.
func (ch *chaos) maybePromote() {
	if ch.rng.IntN(2) == 0 {
		ch.promote()
	}
	ch.sleep(2 * time.Second)
}

func (ch *chaos) sleep(upTo time.Duration) {
	time.Sleep(time.Duration(ch.rng.Int64N(int64(upTo))))
}
