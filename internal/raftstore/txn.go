package raftstore

import "fmt"

// Txn applies several commands as one log entry: all of them in order, or
// none when one is rejected (consul's applyTxn in agent/consul/fsm). One
// logical write of the leader (an experiment and its operation; a delete
// and the experiments it lets into preview) is one Txn, so no node, and no
// leader that takes over halfway, ever sees half of it.
//
// Only the table commands may be in a Txn: generation lifecycle commands
// are made durable before publication one by one (FSM.Apply), and bundles
// have their own bound.
type Txn struct {
	Ops []Command `json:"ops"`
}

// txnTypes are the command types a Txn may hold.
var txnTypes = map[CommandType]bool{
	TypePutExperiment: true, TypeDeleteExperiment: true,
	TypePutDismissal: true, TypeDeleteDismissal: true,
	TypePutOperation: true, TypeDeleteOperation: true,
	TypePutSourceStatus: true, TypeDeleteSourceStatus: true,
	TypePutBranch: true, TypeDeleteBranch: true,
	TypePutPull: true, TypeDeletePull: true,
	TypePutClaim: true, TypeDeleteClaim: true,
}

// NewTxn wraps ps, validated, in a Txn. Times must be set: nothing stamps
// them inside a Txn.
func NewTxn(ps ...Payload) (*Txn, error) {
	t := &Txn{Ops: make([]Command, 0, len(ps))}
	for _, p := range ps {
		c, err := NewCommand(p)
		if err != nil {
			return nil, err
		}
		t.Ops = append(t.Ops, c)
	}
	return t, t.Validate()
}

// Batch returns the payload that applies ps as one log entry: p itself
// for one, a Txn for several, nil for none.
func Batch(ps ...Payload) (Payload, error) {
	switch len(ps) {
	case 0:
		return nil, nil
	case 1:
		return ps[0], nil
	}
	return NewTxn(ps...)
}

// CommandType implements Payload.
func (Txn) CommandType() CommandType { return TypeTxn }

// Validate implements Payload: every op on its own; the state is checked
// when the Txn applies.
func (t Txn) Validate() error {
	if len(t.Ops) == 0 || len(t.Ops) > MaxTxnOps {
		return invalid("a txn holds 1 to %d commands, not %d", MaxTxnOps, len(t.Ops))
	}
	for i, op := range t.Ops {
		if !txnTypes[op.Type] {
			return invalid("op %d: %s cannot be part of a txn", i, op.Type)
		}
		if err := op.Validate(); err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
	}
	return nil
}

// applyTxn applies a Txn to a copy of the state and keeps the copy only
// when every op applied. With IgnoreUnknown, a Txn holding an op this
// build does not know is ignored whole, never in part.
func (a *Applier) applyTxn(raw []byte) error {
	var t Txn
	if err := decodePayload(raw, &t); err != nil {
		return err
	}
	if _, unknown := t.unknownOp(); unknown && a.IgnoreUnknown {
		return nil
	}
	if err := t.Validate(); err != nil {
		return err
	}
	scratch := a.State.Clone()
	for i, op := range t.Ops {
		if err := handlers[op.Type].apply(scratch, op.Version, op.Payload); err != nil {
			return fmt.Errorf("op %d (%s): %w", i, op.Type, err)
		}
	}
	*a.State = *scratch
	return nil
}

// unknownOp returns the first op this build cannot apply.
func (t Txn) unknownOp() (Command, bool) {
	for _, op := range t.Ops {
		if !Supported(op.Type, op.Version) {
			return op, true
		}
	}
	return Command{}, false
}

// ignoredOp returns, for the log, the op of a Txn entry that IgnoreUnknown
// makes this build skip.
func ignoredOp(cmd Command) (Command, bool) {
	if cmd.Type != TypeTxn || !Supported(cmd.Type, cmd.Version) {
		return cmd, !Supported(cmd.Type, cmd.Version)
	}
	var t Txn
	if decodePayload(cmd.Payload, &t) != nil {
		return Command{}, false
	}
	return t.unknownOp()
}
