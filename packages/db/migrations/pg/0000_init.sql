CREATE TABLE "auth_nonces" (
	"nonce" text PRIMARY KEY NOT NULL,
	"wallet_address" text NOT NULL,
	"message" text NOT NULL,
	"expires_at" bigint NOT NULL,
	"used_at" bigint
);
--> statement-breakpoint
CREATE TABLE "credit_packages" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"credits" integer NOT NULL,
	"bonus_percent" integer NOT NULL,
	"price_usd_cents" integer NOT NULL,
	"sort_order" integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE "credit_transactions" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"type" text NOT NULL,
	"amount_micro" bigint NOT NULL,
	"balance_after_micro" bigint NOT NULL,
	"description" text NOT NULL,
	"tx_signature" text,
	"deployment_id" text,
	"deposit_id" text,
	"created_at" bigint NOT NULL,
	"seq" integer NOT NULL,
	CONSTRAINT "credit_transactions_tx_signature_unique" UNIQUE("tx_signature")
);
--> statement-breakpoint
CREATE TABLE "deployment_logs" (
	"id" serial PRIMARY KEY NOT NULL,
	"deployment_id" text NOT NULL,
	"seq" integer NOT NULL,
	"ts" text NOT NULL,
	"ts_ms" bigint NOT NULL,
	"stream" text NOT NULL,
	"message" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "deployments" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"node_id" text NOT NULL,
	"template_id" text,
	"name" text,
	"image" text NOT NULL,
	"status" text NOT NULL,
	"desired_state" text NOT NULL,
	"status_reason" text,
	"exit_code" integer,
	"env" jsonb NOT NULL,
	"ports" jsonb NOT NULL,
	"endpoints" jsonb NOT NULL,
	"hourly_rate_cents" integer NOT NULL,
	"total_cost_micro" bigint DEFAULT 0 NOT NULL,
	"reserved_micro" bigint DEFAULT 0 NOT NULL,
	"billed_until" bigint,
	"run_seq" integer DEFAULT 0 NOT NULL,
	"created_at" bigint NOT NULL,
	"started_at" bigint,
	"stopped_at" bigint,
	"updated_at" bigint NOT NULL,
	"deleted_at" bigint
);
--> statement-breakpoint
CREATE TABLE "deposits" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"package_id" text NOT NULL,
	"wallet_address" text NOT NULL,
	"amount_stable_base" bigint NOT NULL,
	"stable_decimals" integer NOT NULL,
	"credits_micro" bigint NOT NULL,
	"treasury_wallet" text NOT NULL,
	"stable_mint" text NOT NULL,
	"status" text NOT NULL,
	"tx_signature" text,
	"transaction_id" text,
	"expires_at" bigint NOT NULL,
	"created_at" bigint NOT NULL,
	"confirmed_at" bigint,
	CONSTRAINT "deposits_tx_signature_unique" UNIQUE("tx_signature")
);
--> statement-breakpoint
CREATE TABLE "nodes" (
	"id" text PRIMARY KEY NOT NULL,
	"operator_id" text NOT NULL,
	"name" text NOT NULL,
	"region" text NOT NULL,
	"country" text NOT NULL,
	"hourly_rate_cents" integer NOT NULL,
	"max_deployments" integer NOT NULL,
	"status" text NOT NULL,
	"agent_token_hash" text NOT NULL,
	"specs" jsonb NOT NULL,
	"gpus" jsonb NOT NULL,
	"gpu_count" integer DEFAULT 0 NOT NULL,
	"max_gpu_vram_mb" integer DEFAULT 0 NOT NULL,
	"cpu_cores" integer DEFAULT 0 NOT NULL,
	"ram_mb" integer DEFAULT 0 NOT NULL,
	"active_deployments" integer DEFAULT 0 NOT NULL,
	"last_heartbeat" bigint,
	"online_since" bigint,
	"online_ms_total" bigint DEFAULT 0 NOT NULL,
	"created_at" bigint NOT NULL,
	"retired_at" bigint,
	CONSTRAINT "nodes_agent_token_hash_unique" UNIQUE("agent_token_hash")
);
--> statement-breakpoint
CREATE TABLE "sessions" (
	"token_hash" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"user_id" text NOT NULL,
	"family_id" text NOT NULL,
	"expires_at" bigint NOT NULL,
	"used_at" bigint,
	"revoked_at" bigint,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "settings" (
	"key" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "templates" (
	"id" text PRIMARY KEY NOT NULL,
	"slug" text NOT NULL,
	"name" text NOT NULL,
	"description" text NOT NULL,
	"category" text NOT NULL,
	"requires_gpu" boolean NOT NULL,
	"min_gpu_vram_mb" integer NOT NULL,
	"container_image" text NOT NULL,
	"default_env" jsonb NOT NULL,
	"ports" jsonb NOT NULL,
	"min_cpu_cores" integer NOT NULL,
	"min_ram_mb" integer NOT NULL,
	"min_disk_gb" integer NOT NULL,
	"estimated_pull_time_s" integer NOT NULL,
	"sort_order" integer NOT NULL,
	CONSTRAINT "templates_slug_unique" UNIQUE("slug")
);
--> statement-breakpoint
CREATE TABLE "users" (
	"id" text PRIMARY KEY NOT NULL,
	"wallet_address" text NOT NULL,
	"is_operator" boolean DEFAULT false NOT NULL,
	"balance_micro" bigint DEFAULT 0 NOT NULL,
	"reserved_micro" bigint DEFAULT 0 NOT NULL,
	"total_used_micro" bigint DEFAULT 0 NOT NULL,
	"ledger_seq" integer DEFAULT 0 NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "users_wallet_address_unique" UNIQUE("wallet_address")
);
--> statement-breakpoint
CREATE INDEX "auth_nonces_wallet_idx" ON "auth_nonces" USING btree ("wallet_address");--> statement-breakpoint
CREATE INDEX "credit_tx_user_idx" ON "credit_transactions" USING btree ("user_id","seq");--> statement-breakpoint
CREATE INDEX "credit_tx_dep_idx" ON "credit_transactions" USING btree ("deployment_id");--> statement-breakpoint
CREATE UNIQUE INDEX "deployment_logs_seq_idx" ON "deployment_logs" USING btree ("deployment_id","seq");--> statement-breakpoint
CREATE INDEX "deployment_logs_ts_idx" ON "deployment_logs" USING btree ("deployment_id","ts_ms");--> statement-breakpoint
CREATE INDEX "deployments_user_idx" ON "deployments" USING btree ("user_id","created_at");--> statement-breakpoint
CREATE INDEX "deployments_node_idx" ON "deployments" USING btree ("node_id","status");--> statement-breakpoint
CREATE INDEX "deposits_user_idx" ON "deposits" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "nodes_created_idx" ON "nodes" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "nodes_status_idx" ON "nodes" USING btree ("status","created_at");--> statement-breakpoint
CREATE INDEX "nodes_operator_idx" ON "nodes" USING btree ("operator_id");--> statement-breakpoint
CREATE INDEX "nodes_region_idx" ON "nodes" USING btree ("region");--> statement-breakpoint
CREATE INDEX "sessions_family_idx" ON "sessions" USING btree ("family_id");