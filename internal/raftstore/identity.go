package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"net"

	"github.com/hashicorp/raft"
)

// ErrNotMember is a raft connection or RPC from a node that the raft
// configuration this node knows does not hold.
var ErrNotMember = errors.New("not a member of the raft configuration")

// ErrWrongIdentity is a raft RPC whose header names another node than the
// certificate of the connection that carries it.
var ErrWrongIdentity = errors.New("the RPC header names another node than the connection's certificate")

// admit reports whether the node a certificate names may speak raft to a
// node whose raft configuration is servers: a member may, and so may any
// node while the configuration is empty, which is a node that has not
// joined yet and must accept the leader that adds it (docs/security.md
// says what that leaves open).
func admit(certID string, servers []raft.Server) error {
	if len(servers) == 0 {
		return nil
	}
	if _, ok := member(servers, certID); ok {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNotMember, certID)
}

func member(servers []raft.Server, id string) (raft.Server, bool) {
	for _, s := range servers {
		if string(s.ID) == id {
			return s, true
		}
	}
	return raft.Server{}, false
}

// checkRPC returns why an RPC from a connection whose certificate names
// certID is refused, nil when raft may see it: the header must name that
// node, the node must be admitted, and the address the RPC gives for its
// sender (the header's Addr, or the deprecated Leader or Candidate field
// raft falls back to) must be the member's address in the configuration.
// raft believes the header: it records the leader, and grants a vote, by
// the id and address it names.
func checkRPC(certID string, cmd any, servers []raft.Server) error {
	h, ok := cmd.(raft.WithRPCHeader)
	if !ok {
		return fmt.Errorf("an RPC of type %T", cmd)
	}
	hdr := h.GetRPCHeader()
	if string(hdr.ID) != certID {
		return fmt.Errorf("%w: header %q, certificate %q", ErrWrongIdentity, hdr.ID, certID)
	}
	if err := admit(certID, servers); err != nil {
		return err
	}
	addr := claimedAddr(cmd, hdr)
	if s, ok := member(servers, certID); ok && len(addr) > 0 && !bytes.Equal(addr, []byte(s.Address)) {
		return fmt.Errorf("%w: %s claims the address %q, its address in the configuration is %s",
			ErrWrongIdentity, certID, addr, s.Address)
	}
	return nil
}

// claimedAddr is the sender's address as raft reads it from the request.
func claimedAddr(cmd any, hdr raft.RPCHeader) []byte {
	if len(hdr.Addr) > 0 {
		return hdr.Addr
	}
	switch r := cmd.(type) {
	case *raft.AppendEntriesRequest:
		return r.Leader
	case *raft.RequestVoteRequest:
		return r.Candidate
	case *raft.InstallSnapshotRequest:
		return r.Leader
	}
	return nil
}

// addrID is the member at addr, "" when the configuration holds none.
func addrID(servers []raft.Server, addr string) string {
	for _, s := range servers {
		if string(s.Address) == addr {
			return string(s.ID)
		}
	}
	return ""
}

// peerConnID is the node the certificate of an accepted connection names.
type peerConnID func(net.Conn) (string, error)
