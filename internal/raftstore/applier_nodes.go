package raftstore

// Handlers for nodes, experiments and operations.

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

func applyHeartbeat(s *State, p Heartbeat) error {
	n, ok := s.Nodes[p.ID]
	if !ok {
		return reject(ErrUnknownNode, "node %s: register it with UpsertNode first", p.ID)
	}
	n.LastHeartbeat = p.Time
	n.Stats = p.Stats
	s.Nodes[p.ID] = n
	return nil
}

func applyPutExperiment(s *State, p PutExperiment) error {
	s.Experiments[p.Name] = Experiment(p)
	return nil
}

func applyDeleteExperiment(s *State, p DeleteExperiment) error {
	delete(s.Experiments, p.Name)
	return nil
}

func applyPutOperation(s *State, p PutOperation) error {
	s.Operations[p.ID] = Operation(p)
	return nil
}

func applyDeleteOperation(s *State, p DeleteOperation) error {
	delete(s.Operations, p.ID)
	return nil
}
