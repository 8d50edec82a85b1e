package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/genway/genway/shared/webhooks"
)

// RunWebhooks checks the webhooks.Store contract on a fresh store from
// open: configs (first secret kept, rotation, default URL) and deliveries
// (added once, saved only with the attempts they were read with).
func RunWebhooks(t *testing.T, open func(t *testing.T) webhooks.Store) {
	ctx := context.Background()
	s := open(t)
	if c, err := s.WebhookConfig(ctx, "a"); err != nil || c != (webhooks.Config{Account: "a"}) {
		t.Errorf("WebhookConfig(new) = %+v, %v; want empty", c, err)
	}
	if _, err := s.RotateWebhookSecret(ctx, "a", "whsec_b", 9, 1); !errors.Is(err, webhooks.ErrNotFound) {
		t.Errorf("Rotate without a secret = %v; want ErrNotFound", err)
	}
	if c, err := s.EnsureWebhookSecret(ctx, "a", "whsec_a", 1); err != nil || c.Secret != "whsec_a" {
		t.Fatalf("EnsureWebhookSecret(first) = %+v, %v", c, err)
	}
	if c, _ := s.EnsureWebhookSecret(ctx, "a", "whsec_z", 2); c.Secret != "whsec_a" {
		t.Errorf("EnsureWebhookSecret replaced the secret: %+v", c)
	}
	if c, _ := s.RotateWebhookSecret(ctx, "a", "whsec_b", 9, 3); c.Secret != "whsec_b" || c.Previous != "whsec_a" || c.PreviousUntil != 9 {
		t.Errorf("Rotate = %+v", c)
	}
	if c, _ := s.SetWebhookURL(ctx, "a", "https://x.example/h", 4); c.URL != "https://x.example/h" || c.Secret != "whsec_b" {
		t.Errorf("SetWebhookURL = %+v", c)
	}
	if c, err := s.SetWebhookURL(ctx, "a", "", 5); err != nil || c.URL != "" || c.Secret != "whsec_b" || c.Updated != 5 {
		t.Errorf("SetWebhookURL(\"\") = %+v, %v; want the URL removed, the secret kept", c, err)
	}
	if c, err := s.WebhookConfig(ctx, "a"); err != nil || c.URL != "" || c.Previous != "whsec_a" || c.Account != "a" {
		t.Errorf("WebhookConfig after removing the URL = %+v, %v", c, err)
	}
	if _, err := s.Delivery(ctx, "job_x"); !errors.Is(err, webhooks.ErrNotFound) {
		t.Errorf("Delivery(none) = %v; want ErrNotFound", err)
	}
	d := &webhooks.Delivery{ID: "evt_x", JobID: "job_x", Status: webhooks.Pending}
	if got, err := s.AddDelivery(ctx, d); err != nil || got.Status != webhooks.Pending {
		t.Fatalf("AddDelivery(first) = %+v, %v", got, err)
	}
	if got, _ := s.AddDelivery(ctx, &webhooks.Delivery{ID: "evt_x", JobID: "job_x", Status: webhooks.Failed}); got.Status != webhooks.Pending {
		t.Errorf("AddDelivery replaced a delivery: %+v", got)
	}
	d.Attempts = 1
	if err := s.SaveDelivery(ctx, d, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDelivery(ctx, d, 0); !errors.Is(err, webhooks.ErrConflict) {
		t.Errorf("SaveDelivery with stale attempts = %v; want ErrConflict", err)
	}
}
