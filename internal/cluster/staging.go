package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// DefaultStagingTimeout is how long the leader waits for a node's Ready
// before it leaves the node behind and promotes without it.
const DefaultStagingTimeout = 60 * time.Second

// maxLoggedErrorBytes bounds the error of each node in the left-behind log
// line: the full list is in the generation's record.
const maxLoggedErrorBytes = 512

// verdict is how the serving nodes stand on the staged generation.
type verdict struct {
	// wait are the nodes whose Ready the leader waits for.
	wait []string
	// failed reported that they cannot load it: left behind at once.
	failed []string
	// late have not reported Ready within the staging timeout while most
	// others have: left behind.
	late []string
	// lagging do not follow the raft log (follow.go) while most others are
	// Ready: left behind, with since when.
	lagging map[string]Lag
	// unloadable: the failed nodes leave no majority of the serving nodes
	// able to load it. The generation, not the nodes, is at fault.
	unloadable bool
}

// staging decides, on the leader, which nodes a staged generation waits
// for: the serving nodes less those left behind (judge). It logs each set
// of nodes left behind once.
type staging struct {
	self    string
	now     func() time.Time
	timeout time.Duration // Config.StagingTimeout
	hb      *heartbeats
	log     hclog.Logger

	mu        sync.Mutex
	behindKey string // the last nodes left behind, logged once
}

// judge applies the rules of a node that cannot follow, as Kubewarden
// takes a replica out of rotation instead of stopping the rollout:
//
//   - A serving node that reported the generation failed (a build or a
//     setting of its own) is not waited for: the others promote, and it
//     stays out of rotation until it loads a later generation.
//   - When the failed nodes leave no majority of the serving nodes (ids)
//     able to load it, the generation is what is wrong: unloadable, and
//     every node stays required, so it is never activated.
//   - A node that has not applied an entry the leader had applied for
//     longer than the follow timeout (a full disk, a stalled apply, a
//     raft port cut off while its heartbeats arrive) is left behind when
//     the Ready nodes are a majority. This counts from when it stopped
//     following, not from the generation's creation: commits every few
//     seconds supersede each generation long before any timeout of its own.
//   - Past the staging timeout, a node that has not reported Ready (a
//     compile that hangs, a paused process that still counts as
//     reachable) is left behind when the Ready nodes are a majority;
//     otherwise the generation is in doubt and waits (or is superseded).
//     The leader itself is always waited for.
func (sg *staging) judge(g raftstore.Generation, ids []string) verdict {
	var v verdict
	var pending []string
	for _, id := range ids {
		_, ready := g.ReadyNodes[id]
		_, failed := g.NodeErrors[id]
		switch {
		case ready:
			v.wait = append(v.wait, id)
		case failed:
			v.failed = append(v.failed, id)
		default:
			pending = append(pending, id)
		}
	}
	if 2*(len(ids)-len(v.failed)) <= len(ids) {
		return verdict{wait: ids, failed: v.failed, unloadable: true}
	}
	sg.judgePending(&v, g, pending, len(ids))
	slices.Sort(v.wait)
	return v
}

// judgePending sorts the nodes that have not reported into those still
// waited for and those left behind. v.wait holds the Ready nodes so far;
// serving is how many nodes count.
func (sg *staging) judgePending(v *verdict, g raftstore.Generation, pending []string, serving int) {
	majority := 2*len(v.wait) > serving
	timedOut := sg.now().Sub(g.CreateTime) >= sg.timeout
	for _, id := range pending {
		if id == sg.self || !majority {
			v.wait = append(v.wait, id)
			continue
		}
		if lag := sg.hb.lag(id); lag != nil {
			if v.lagging == nil {
				v.lagging = map[string]Lag{}
			}
			v.lagging[id] = *lag
			continue
		}
		if timedOut {
			v.late = append(v.late, id)
		} else {
			v.wait = append(v.wait, id)
		}
	}
}

// dropLeftBehind removes from ids (the serving nodes) those the staged
// generation does not wait for (judge), and logs them once.
func (sg *staging) dropLeftBehind(st *raftstore.State, ids []string) []string {
	g, ok := st.StagedGeneration()
	if !ok {
		return ids
	}
	v := sg.judge(g, ids)
	if !v.unloadable {
		sg.logLeftBehind(g, v)
	}
	return v.wait
}

// serving returns the nodes whose loading of a staged generation counts:
// itself, every registered node it heard from within the reachability
// window, and every node registered (joined or rejoined) within the
// window, which may not have sent a heartbeat yet. Until this leader has
// led for one window every registered node counts, since a live node may
// not have found the new leader yet. SAFE and PASSIVE nodes, and nodes
// whose last heartbeat said TERMINATED, never count (states.go).
func (sg *staging) serving(st *raftstore.State) []string {
	settled := sg.hb.settled()
	now := sg.now()
	ids := []string{sg.self}
	for id, n := range st.Nodes {
		if id == sg.self || !waitsFor(n.State) || sg.hb.terminated(id) {
			continue
		}
		if !settled || sg.hb.fresh(id) || now.Sub(n.UpdateTime) < sg.hb.window {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Unloadable returns why the staged generation must be marked INVALID:
// the nodes that reported it failed leave no majority of the serving
// nodes able to load it. It names those nodes with their first error (the
// generation's record keeps all of them). Nil when there is no staged
// generation or a majority can load it.
func (c *Cluster) Unloadable(st *raftstore.State) []string {
	g, ok := st.StagedGeneration()
	if !ok {
		return nil
	}
	ids := c.staging.serving(st)
	v := c.staging.judge(g, ids)
	if !v.unloadable {
		return nil
	}
	out := []string{fmt.Sprintf("generation %d cannot be loaded by a majority of the serving nodes: %d of %d (%s) failed to load it",
		g.Number, len(v.failed), len(ids), strings.Join(v.failed, ", "))}
	for _, id := range v.failed {
		out = append(out, "node "+id+": "+firstError(g.NodeErrors[id]))
	}
	return out
}

// firstError is a node's first error, with how many it left out.
func firstError(errs []string) string {
	if len(errs) == 0 {
		return "failed"
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Sprintf("%s (and %d more)", errs[0], len(errs)-1)
}

// logLeftBehind logs once per generation and set of nodes which nodes
// the leader promotes without, and why.
func (sg *staging) logLeftBehind(g raftstore.Generation, v verdict) {
	if len(v.failed) == 0 && len(v.late) == 0 && len(v.lagging) == 0 {
		return
	}
	lagging := slices.Sorted(maps.Keys(v.lagging))
	key := fmt.Sprint(g.Number, v.failed, v.late, lagging)
	sg.mu.Lock()
	seen := sg.behindKey == key
	sg.behindKey = key
	sg.mu.Unlock()
	if seen {
		return
	}
	if len(v.failed) > 0 {
		errs := make(map[string]string, len(v.failed))
		for _, id := range v.failed {
			errs[id] = clip(firstError(g.NodeErrors[id]), maxLoggedErrorBytes)
		}
		sg.log.Warn("nodes cannot load the staged generation: promoting without them; they leave rotation until they load a later one",
			"generation", g.Number, "nodes", v.failed, "errors", errs)
	}
	if len(v.late) > 0 {
		sg.log.Warn("nodes not Ready within the staging timeout: promoting without them; they leave rotation until they catch up",
			"generation", g.Number, "nodes", v.late, "staging_timeout", sg.timeout)
	}
	if len(lagging) > 0 {
		// Warned once per node when it stopped following (follow.go); this
		// repeats for every generation while it does not follow.
		sg.log.Info("promoting without the nodes that do not follow the raft log", "generation", g.Number,
			"nodes", lagging)
	}
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
