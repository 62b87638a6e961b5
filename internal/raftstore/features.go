package raftstore

import (
	"fmt"
	"sync/atomic"

	"github.com/policyrollout/reconciler/internal/version"
)

// The feature table: every command version and snapshot format that a
// release added after the first, with the release that can apply it. The
// leader consults it before it proposes (Store.Apply): a member of an older
// release would refuse the entry and fall out of step with the others. A
// row is added with the version bump (DESIGN.md, "Rolling upgrades"); what
// is not listed is release 1.0.0's.

// feature is one row: command Type at payload Version needs Since.
type feature struct {
	Name    string
	Type    CommandType
	Version uint8
	Since   string
}

var features = []feature{
	{Name: "conditional operation writes", Type: TypePutOperation, Version: ConditionalOperationVersion, Since: "1.1.0"},
	{Name: "experiments carry the lists they change", Type: TypePutExperiment, Version: PutExperimentListsVersion, Since: "1.1.0"},
	{Name: "generations record the commit's author and who rolled back", Type: TypeStageGeneration, Version: StageHistoryVersion, Since: "1.1.0"},
}

// Feature is a row of the feature table, for status pages.
type Feature struct {
	// Name says what the feature does.
	Name string
	// Since is the release every member must run before the leader uses it.
	Since version.V
}

// Features lists the feature table.
func Features() []Feature {
	out := make([]Feature, len(features))
	for i, f := range features {
		out[i] = Feature{Name: f.Name, Since: version.Must(f.Since)}
	}
	return out
}

// snapshotFormats lists the release that reads each snapshot format. Every
// format this build writes (2, and 3 with chunks) is read by 1.0.0, so
// snapshotView needs no cluster version yet; a new format adds a row here
// and a fallback there.
var snapshotFormats = map[int]string{
	legacySnapshotFormat:  version.Oldest,
	snapshotFormat:        version.Oldest,
	chunkedSnapshotFormat: version.Oldest,
}

// Requires is the release a member must run to apply cmd: the newest
// Since of cmd and, for a Txn, of every command it holds.
func Requires(cmd Command) version.V {
	need := version.Must(version.Oldest)
	for _, f := range features {
		if f.Type == cmd.Type && cmd.Version >= f.Version {
			need = maxVersion(need, version.Must(f.Since))
		}
	}
	if cmd.Type == TypeTxn {
		if p, err := decodeValid[Txn](cmd.Payload); err == nil {
			for _, op := range p.Ops {
				need = maxVersion(need, Requires(op))
			}
		}
	}
	return need
}

func maxVersion(a, b version.V) version.V {
	if a.Less(b) {
		return b
	}
	return a
}

// clusterVersion holds the function that says which release every member
// runs (internal/cluster, from heartbeats). Without one, the store gates
// nothing: a lone store in a test, or a tool, proposes what it likes.
type clusterVersion struct {
	fn atomic.Pointer[func() version.V]
}

// SetClusterVersion installs fn as the cluster version the leader checks
// each command against. The cluster layer, built after the store, calls it.
func (s *Store) SetClusterVersion(fn func() version.V) { s.cv.fn.Store(&fn) }

// ClusterVersion is the lowest release among the members, or this build's
// when no function is installed.
func (s *Store) ClusterVersion() version.V {
	if fn := s.cv.fn.Load(); fn != nil {
		return (*fn)()
	}
	return version.This()
}

// Allows reports whether every member can apply type t at payload version
// v, so a proposer can fall back to an older payload version.
func (s *Store) Allows(t CommandType, v uint8) bool {
	return !s.ClusterVersion().Less(Requires(Command{Type: t, Version: v}))
}

// checkFeature refuses cmd when some member runs too old a release for it.
func (s *Store) checkFeature(cmd Command) error {
	need := Requires(cmd)
	if have := s.ClusterVersion(); have.Less(need) {
		return fmt.Errorf("%w: %s version %d needs every member at %s, the lowest runs %s",
			ErrNotYet, cmd.Type, cmd.Version, need, have)
	}
	return nil
}
