package raftstore

import "fmt"

// TransferLeadership asks raft to hand leadership to the voter id, or to
// the most up-to-date voter when id is "". It returns once raft has
// started an election on the target or given up (raft's own bound: one
// election timeout). Leader only.
func (s *Store) TransferLeadership(id string) error {
	if !s.IsLeader() {
		return ErrNotLeader
	}
	if id == "" {
		if err := s.raft.LeadershipTransfer().Error(); err != nil {
			return fmt.Errorf("transfer leadership: %w", err)
		}
		return nil
	}
	servers, err := s.Servers()
	if err != nil {
		return err
	}
	for _, srv := range servers {
		if string(srv.ID) == id {
			if err := s.raft.LeadershipTransferToServer(srv.ID, srv.Address).Error(); err != nil {
				return fmt.Errorf("transfer leadership to %s: %w", id, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not in the raft configuration", ErrUnknownNode, id)
}
