package cluster

import (
	"slices"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// DefaultStagingTimeout is how long the leader waits for a node's Ready
// before it leaves the node behind and promotes without it.
const DefaultStagingTimeout = 60 * time.Second

// dropLeftBehind removes from ids (the nodes the leader would wait for)
// those that have not reported Ready for the staged generation within the
// staging timeout, as Kubewarden takes a replica out of rotation instead
// of stopping the rollout: a node whose compile hangs no longer holds every
// promotion. It keeps them all when those left would not be a majority of
// ids, since then it is the generation, not the nodes, that is in doubt;
// the generation then waits (or is superseded).
func (c *Cluster) dropLeftBehind(st *raftstore.State, ids []string) []string {
	g, ok := st.StagedGeneration()
	if !ok || c.cfg.Now().Sub(g.CreateTime) < c.cfg.StagingTimeout {
		return ids
	}
	kept := make([]string, 0, len(ids))
	var behind []string
	for _, id := range ids {
		if _, ready := g.ReadyNodes[id]; ready || id == c.cfg.NodeID {
			kept = append(kept, id)
		} else {
			behind = append(behind, id)
		}
	}
	if len(behind) == 0 || 2*len(kept) <= len(ids) {
		return ids
	}
	c.logLeftBehind(g.Number, behind)
	return kept
}

// logLeftBehind logs once per generation which nodes the leader promotes
// without.
func (c *Cluster) logLeftBehind(gen uint64, behind []string) {
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	if c.behindGen == gen && slices.Equal(c.behindIDs, behind) {
		return
	}
	c.behindGen, c.behindIDs = gen, slices.Clone(behind)
	c.log.Warn("nodes not Ready within the staging timeout: promoting without them; they leave rotation until they catch up",
		"generation", gen, "nodes", behind, "staging_timeout", c.cfg.StagingTimeout)
}
