package v2

import (
	"encoding/json"
	"fmt"

	"github.com/cairn-es/cairn/upcast"
)

// Upcasters read what version 1 stored as version 2's types:
//
//   - the Payment aggregate's events ("payment.accepted" v1, ...) become
//     Finance's ("finance.payment-accepted" v2, ...): renamed, then their
//     customer becomes the account and amounts get a currency;
//   - the payment commands that version 1 sales recorded in their steps
//     ("sale.make-payment" v1, ...) become version 2's, in the same way,
//     since a sale's history is read back with its commands;
//   - the sale state ("sale.state" v1) becomes version 2's Sale.
func Upcasters() []upcast.Step {
	var steps []upcast.Step
	for _, what := range []string{"authorized", "requested", "accepted", "cancelled"} {
		steps = append(steps,
			upcast.Rename("payment."+what, 1, "finance.payment-"+what, 1),
			upcast.TransformJSON("finance.payment-"+what, 1, customerIsAccount))
	}
	return append(steps,
		upcast.TransformJSON("sale.make-payment", 1, customerIsAccount),
		upcast.TransformJSON("sale.cancel-payment", 1, customerIsAccount),
		upcast.TransformJSON("sale.state", 1, saleStateV2),
	)
}

// customerIsAccount renames "customer" to "account" (a customer has one
// account), and gives an amount its currency.
func customerIsAccount(f map[string]json.RawMessage) error {
	customer, ok := f["customer"]
	if !ok {
		return fmt.Errorf(`no "customer" field`)
	}
	f["account"] = customer
	delete(f, "customer")
	if _, ok := f["amount_cents"]; ok {
		f["currency"], _ = json.Marshal(Currency)
	}
	return nil
}

// saleStateV2 turns version 1's sale state into version 2's: the customer
// is the account, and the stage is the outcome, or where the sale was
// while it ran.
func saleStateV2(f map[string]json.RawMessage) error {
	if err := customerIsAccount(f); err != nil {
		return err
	}
	delete(f, "currency") // a sale's amount is in its order's currency
	var v1 struct {
		Reserved bool   `json:"reserved"`
		Outcome  string `json:"outcome"`
	}
	reserved, outcome := f["reserved"], f["outcome"]
	if reserved != nil {
		if err := json.Unmarshal(reserved, &v1.Reserved); err != nil {
			return fmt.Errorf("reserved: %w", err)
		}
	}
	if outcome != nil {
		if err := json.Unmarshal(outcome, &v1.Outcome); err != nil {
			return fmt.Errorf("outcome: %w", err)
		}
	}
	stage := v1.Outcome
	switch {
	case stage != "":
	case v1.Reserved:
		stage = StagePaying
	default:
		stage = StageReserving
	}
	delete(f, "reserved")
	delete(f, "outcome")
	f["stage"], _ = json.Marshal(stage)
	return nil
}
