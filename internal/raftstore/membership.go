package raftstore

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// membershipTimeout bounds enqueueing a configuration change.
const membershipTimeout = 10 * time.Second

// AddVoter adds a voting member. Adding a member that is already there
// with the same address is a no-op (a nonvoter is promoted); the same id at
// another address, or another id at the same address, is refused with
// ErrMembership and the configuration is left as it is. Leader only.
func (s *Store) AddVoter(id, addr string) error {
	return s.addServer(id, addr, raft.Voter)
}

// AddNonvoter adds a read replica that applies the log without voting.
// Same rules as AddVoter; an existing voter is left a voter.
func (s *Store) AddNonvoter(id, addr string) error {
	return s.addServer(id, addr, raft.Nonvoter)
}

func (s *Store) addServer(id, addr string, suffrage raft.ServerSuffrage) error {
	if !s.IsLeader() {
		return ErrNotLeader
	}
	servers, err := s.Servers()
	if err != nil {
		return err
	}
	existing, found, err := findMember(servers, id, addr)
	if err != nil {
		return err
	}
	if found && (existing.Suffrage == suffrage || existing.Suffrage == raft.Voter) {
		return nil
	}
	var f raft.IndexFuture
	if suffrage == raft.Voter {
		f = s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, membershipTimeout)
	} else {
		f = s.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, membershipTimeout)
	}
	if err := f.Error(); err != nil {
		return fmt.Errorf("add %s at %s: %w", id, addr, err)
	}
	return nil
}

// findMember looks id and addr up and refuses a half match, which raft
// would otherwise accept and turn into a configuration with a member that
// cannot be reached (or two members behind one address).
func findMember(servers []raft.Server, id, addr string) (raft.Server, bool, error) {
	for _, srv := range servers {
		sameID, sameAddr := string(srv.ID) == id, string(srv.Address) == addr
		switch {
		case sameID && sameAddr:
			return srv, true, nil
		case sameID:
			return srv, false, fmt.Errorf("%w: node %s is a member at %s, not %s: remove it before adding it at the new address",
				ErrMembership, id, srv.Address, addr)
		case sameAddr:
			return srv, false, fmt.Errorf("%w: address %s belongs to member %s, not %s: remove %s first",
				ErrMembership, addr, srv.ID, id, srv.ID)
		}
	}
	return raft.Server{}, false, nil
}

// RemoveServer removes a member. Removing a non-member is a no-op. Leader
// only. A removed node shuts its raft down (raft's ShutdownOnRemove).
func (s *Store) RemoveServer(id string) error {
	if !s.IsLeader() {
		return ErrNotLeader
	}
	servers, err := s.Servers()
	if err != nil {
		return err
	}
	for _, srv := range servers {
		if string(srv.ID) == id {
			if err := s.raft.RemoveServer(srv.ID, 0, membershipTimeout).Error(); err != nil {
				return fmt.Errorf("remove %s: %w", id, err)
			}
			return nil
		}
	}
	return nil
}

// Servers returns the latest raft configuration.
func (s *Store) Servers() ([]raft.Server, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("read raft configuration: %w", err)
	}
	return f.Configuration().Servers, nil
}
