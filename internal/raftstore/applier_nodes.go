package raftstore

// Handlers for nodes and operations.

func applyUpsertNode(s *State, p UpsertNode) error {
	n, ok := s.Nodes[p.ID]
	if !ok || n.State == NodeTerminated {
		// A terminated id that registers again is a new node.
		n = Node{ID: p.ID, State: NodeActive, JoinTime: p.Time}
	} else if (n.Group != p.Group || n.Subgroup != p.Subgroup) && n.State != NodePassive {
		// ONAP: a PDP changes group only while PASSIVE, so it never serves
		// one group's policies under another group's name.
		return reject(ErrNodeState, "node %s is %s: set it PASSIVE before moving it from %s/%s to %s/%s",
			p.ID, n.State, n.Group, n.Subgroup, p.Group, p.Subgroup)
	}
	n.RaftAddr, n.HTTPAddr = p.RaftAddr, p.HTTPAddr
	n.Group, n.Subgroup = p.Group, p.Subgroup
	n.Voter = p.Voter
	n.UpdateTime = p.Time
	s.Nodes[p.ID] = n
	return nil
}

func applyRemoveNode(s *State, p RemoveNode) error {
	delete(s.Nodes, p.ID)
	return nil
}

func applySetNodeState(s *State, p SetNodeState) error {
	n, ok := s.Nodes[p.ID]
	if !ok {
		return reject(ErrUnknownNode, "node %s", p.ID)
	}
	if n.State == NodeTerminated && p.State != NodeTerminated {
		return reject(ErrNodeState, "node %s is TERMINATED: register it again with UpsertNode", p.ID)
	}
	n.State = p.State
	s.Nodes[p.ID] = n
	return nil
}

// applyPutOperation stores the document; a version 2 write only over the
// document its IfMatch names, which every node holds alike, so a write
// that lost a race is rejected everywhere and changes nothing.
func applyPutOperation(s *State, version uint8, p PutOperation) error {
	if p.IfMatch != "" {
		if version < ConditionalOperationVersion {
			return reject(ErrInvalidCommand, "ifMatch in a version %d operation write", version)
		}
		cur, ok := s.Operations[p.ID]
		if got := OperationMatch(cur, ok); got != p.IfMatch {
			return reject(ErrConflict, "operation %s changed since it was read", p.ID)
		}
	}
	s.Operations[p.ID] = Operation{ID: p.ID, Data: p.Data}
	return nil
}

func applyDeleteOperation(s *State, p DeleteOperation) error {
	delete(s.Operations, p.ID)
	return nil
}
