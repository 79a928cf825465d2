CREATE TABLE "operator_earnings" (
	"id" text PRIMARY KEY NOT NULL,
	"account" text NOT NULL,
	"type" text NOT NULL,
	"operator_id" text NOT NULL,
	"node_id" text NOT NULL,
	"deployment_id" text NOT NULL,
	"credit_transaction_id" text NOT NULL,
	"amount_micro" bigint NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "operator_earnings_operator_idx" ON "operator_earnings" USING btree ("operator_id","created_at");--> statement-breakpoint
CREATE INDEX "operator_earnings_dep_idx" ON "operator_earnings" USING btree ("deployment_id");--> statement-breakpoint
CREATE INDEX "operator_earnings_txn_idx" ON "operator_earnings" USING btree ("credit_transaction_id");