CREATE TABLE "payouts" (
	"id" text PRIMARY KEY NOT NULL,
	"operator_id" text NOT NULL,
	"amount_micro" bigint NOT NULL,
	"amount_stable_base" bigint NOT NULL,
	"stable_mint" text NOT NULL,
	"stable_decimals" integer NOT NULL,
	"wallet_address" text NOT NULL,
	"status" text NOT NULL,
	"approved_at" bigint,
	"attempt" integer NOT NULL,
	"signature" text,
	"signed_tx" text,
	"last_valid_block_height" bigint,
	"earlier_signatures" text NOT NULL,
	"error" text,
	"lease_owner" text,
	"lease_until" bigint,
	"requested_at" bigint NOT NULL,
	"paid_at" bigint,
	"updated_at" bigint NOT NULL,
	CONSTRAINT "payouts_signature_unique" UNIQUE("signature")
);
--> statement-breakpoint
ALTER TABLE "deposits" ADD COLUMN "refusal_code" text;--> statement-breakpoint
ALTER TABLE "deposits" ADD COLUMN "refusal_signature" text;--> statement-breakpoint
CREATE INDEX "payouts_operator_idx" ON "payouts" USING btree ("operator_id","requested_at");--> statement-breakpoint
CREATE INDEX "payouts_status_idx" ON "payouts" USING btree ("status");--> statement-breakpoint
CREATE INDEX "deposits_open_idx" ON "deposits" USING btree ("status","expires_at");