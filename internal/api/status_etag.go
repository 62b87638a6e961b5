package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
)

// /v1/status holds clock readings and counters that move on every
// heartbeat of a cluster where nothing happens: heartbeat times, applied
// raft indexes, the time of the source's last read, decision statistics
// and the preview rules' counts. A tag over the whole body would almost
// never match, and a console polling the overview would download it every
// time. Its tag is therefore weak (RFC 9110 §8.8.1): a hash of the status
// without those readings, so a 304 says "the cluster is what it was" —
// generations, commits, nodes' states, reachability and health,
// conditions, experiments, parts. A client that wants the readings
// themselves fresh sends no If-None-Match.

// writeStatus answers GET /v1/status with res under its weak tag.
func (s *clusterAPI) writeStatus(w http.ResponseWriter, r *http.Request, res apiv1.Status) {
	body, err := json.Marshal(res)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	stable, err := json.Marshal(withoutReadings(res))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if notModifiedTag(w, r, "W/"+bodyETag(stable)) {
		return
	}
	writeJSON(w, http.StatusOK, append(body, '\n'))
}

// withoutReadings is res with its clock readings and counters zeroed, for
// the tag. res is not modified: its slices are copied where changed.
func withoutReadings(res apiv1.Status) apiv1.Status {
	res.Source.Time = time.Time{}
	res.Statistics = apiv1.Statistics{}
	res.Nodes = slices.Clone(res.Nodes)
	for i := range res.Nodes {
		n := &res.Nodes[i]
		n.LastHeartbeat, n.AppliedIndex = time.Time{}, 0
		if n.Status != nil {
			st := *n.Status
			st.Statistics = apiv1.Statistics{}
			n.Status = &st
		}
	}
	res.PreviewRules = slices.Clone(res.PreviewRules)
	for i := range res.PreviewRules {
		res.PreviewRules[i].Stats = nil
	}
	return res
}
