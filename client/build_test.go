package client

import (
	"testing"

	"github.com/ployz/ployz/core/images"
)

func TestDeliveryFailed(t *testing.T) {
	ok := []images.Result{{MachineName: "m1", Outcome: "delivered"}, {MachineName: "m2", Outcome: "present"}}
	if DeliveryFailed(ok) || DeliveryFailed(nil) {
		t.Error("a delivery that reached every Machine counted as failed")
	}
	if !DeliveryFailed(append(ok, images.Result{MachineName: "m3", Outcome: "failed"})) {
		t.Error("a Machine that failed went unnoticed")
	}
}
