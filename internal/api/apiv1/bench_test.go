package apiv1

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// BenchmarkNodeList is the price of the views on the largest list the
// status renders: mapping 100 nodes with their heartbeats (map), against
// encoding the mapped list (encode), which the server paid already when
// it rendered the records themselves.
func BenchmarkNodeList(b *testing.B) {
	nodes := make([]raftstore.Node, 100)
	hbs := make([]cluster.NodeView, 100)
	for i := range nodes {
		fill(&nodes[i])
		fill(&hbs[i])
		nodes[i].ID = fmt.Sprintf("n%d", i)
	}
	mapAll := func() NodeList {
		out := NodeList{Nodes: make([]Node, 0, len(nodes))}
		for i := range nodes {
			out.Nodes = append(out.Nodes, FromNode(nodes[i], hbs[i]))
		}
		return out
	}
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = mapAll()
		}
	})
	list := mapAll()
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(list); err != nil {
				b.Fatal(err)
			}
		}
	})
}
