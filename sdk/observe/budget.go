package observe

import (
	"fmt"
	"strings"

	units "github.com/docker/go-units"
)

// BudgetLabel is the Machine label an operator sets the Observe Store's
// disk budget with (`ployz machine init|add|update --observe-budget`):
// a size such as "8MiB", "512MB" or "2GiB" (binary units either way) or a
// plain number of bytes. ployzd hands it to both plugins as Budget.MaxBytes;
// unset, the default (DefaultMaxBytes) applies.
const BudgetLabel = "ployz.observe.budget"

// MinBudgetBytes is the smallest budget accepted: below it the logstore
// would delete lines faster than a query could read them.
const MinBudgetBytes = 1 << 20

// ParseBudget reads a BudgetLabel value.
func ParseBudget(v string) (int64, error) {
	n, err := units.RAMInBytes(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("observe budget %q: want a size such as 8MiB or 2GiB", v)
	}
	if n < MinBudgetBytes {
		return 0, fmt.Errorf("observe budget %q: %d bytes is below the minimum of 1MiB", v, n)
	}
	return n, nil
}

// BudgetFromLabels is the budget a Machine's labels ask for: MaxBytes from
// BudgetLabel (zero, i.e. the default, when unset or not a size: ployzd
// refuses such a value when it is set, so that only happens with a record
// edited by hand).
func BudgetFromLabels(labels map[string]string) Budget {
	v, ok := labels[BudgetLabel]
	if !ok {
		return Budget{}
	}
	n, err := ParseBudget(v)
	if err != nil {
		return Budget{}
	}
	return Budget{MaxBytes: n}
}
