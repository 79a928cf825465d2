CREATE TABLE `auth_nonces` (
	`nonce` text PRIMARY KEY NOT NULL,
	`wallet_address` text NOT NULL,
	`message` text NOT NULL,
	`expires_at` integer NOT NULL,
	`used_at` integer
);
--> statement-breakpoint
CREATE INDEX `auth_nonces_wallet_idx` ON `auth_nonces` (`wallet_address`);--> statement-breakpoint
CREATE TABLE `credit_packages` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`credits` integer NOT NULL,
	`bonus_percent` integer NOT NULL,
	`price_usd_cents` integer NOT NULL,
	`sort_order` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `credit_transactions` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`type` text NOT NULL,
	`amount_micro` integer NOT NULL,
	`balance_after_micro` integer NOT NULL,
	`description` text NOT NULL,
	`tx_signature` text,
	`deployment_id` text,
	`deposit_id` text,
	`created_at` integer NOT NULL,
	`seq` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `credit_transactions_tx_signature_unique` ON `credit_transactions` (`tx_signature`);--> statement-breakpoint
CREATE INDEX `credit_tx_user_idx` ON `credit_transactions` (`user_id`,`seq`);--> statement-breakpoint
CREATE INDEX `credit_tx_dep_idx` ON `credit_transactions` (`deployment_id`);--> statement-breakpoint
CREATE TABLE `deployment_logs` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`deployment_id` text NOT NULL,
	`seq` integer NOT NULL,
	`ts` text NOT NULL,
	`ts_ms` integer NOT NULL,
	`stream` text NOT NULL,
	`message` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `deployment_logs_seq_idx` ON `deployment_logs` (`deployment_id`,`seq`);--> statement-breakpoint
CREATE INDEX `deployment_logs_ts_idx` ON `deployment_logs` (`deployment_id`,`ts_ms`);--> statement-breakpoint
CREATE TABLE `deployments` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`node_id` text NOT NULL,
	`template_id` text,
	`name` text,
	`image` text NOT NULL,
	`status` text NOT NULL,
	`desired_state` text NOT NULL,
	`status_reason` text,
	`exit_code` integer,
	`env` text NOT NULL,
	`ports` text NOT NULL,
	`endpoints` text NOT NULL,
	`hourly_rate_cents` integer NOT NULL,
	`total_cost_micro` integer DEFAULT 0 NOT NULL,
	`reserved_micro` integer DEFAULT 0 NOT NULL,
	`billed_until` integer,
	`run_seq` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL,
	`started_at` integer,
	`stopped_at` integer,
	`updated_at` integer NOT NULL,
	`deleted_at` integer
);
--> statement-breakpoint
CREATE INDEX `deployments_user_idx` ON `deployments` (`user_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `deployments_node_idx` ON `deployments` (`node_id`,`status`);--> statement-breakpoint
CREATE TABLE `deposits` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`package_id` text NOT NULL,
	`wallet_address` text NOT NULL,
	`amount_stable_base` integer NOT NULL,
	`stable_decimals` integer NOT NULL,
	`credits_micro` integer NOT NULL,
	`treasury_wallet` text NOT NULL,
	`stable_mint` text NOT NULL,
	`status` text NOT NULL,
	`tx_signature` text,
	`transaction_id` text,
	`expires_at` integer NOT NULL,
	`created_at` integer NOT NULL,
	`confirmed_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `deposits_tx_signature_unique` ON `deposits` (`tx_signature`);--> statement-breakpoint
CREATE INDEX `deposits_user_idx` ON `deposits` (`user_id`);--> statement-breakpoint
CREATE TABLE `nodes` (
	`id` text PRIMARY KEY NOT NULL,
	`operator_id` text NOT NULL,
	`name` text NOT NULL,
	`region` text NOT NULL,
	`country` text NOT NULL,
	`hourly_rate_cents` integer NOT NULL,
	`max_deployments` integer NOT NULL,
	`status` text NOT NULL,
	`agent_token_hash` text NOT NULL,
	`specs` text NOT NULL,
	`gpus` text NOT NULL,
	`gpu_count` integer DEFAULT 0 NOT NULL,
	`max_gpu_vram_mb` integer DEFAULT 0 NOT NULL,
	`cpu_cores` integer DEFAULT 0 NOT NULL,
	`ram_mb` integer DEFAULT 0 NOT NULL,
	`active_deployments` integer DEFAULT 0 NOT NULL,
	`last_heartbeat` integer,
	`online_since` integer,
	`online_ms_total` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL,
	`retired_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `nodes_agent_token_hash_unique` ON `nodes` (`agent_token_hash`);--> statement-breakpoint
CREATE INDEX `nodes_created_idx` ON `nodes` (`created_at`,`id`);--> statement-breakpoint
CREATE INDEX `nodes_status_idx` ON `nodes` (`status`,`created_at`);--> statement-breakpoint
CREATE INDEX `nodes_operator_idx` ON `nodes` (`operator_id`);--> statement-breakpoint
CREATE INDEX `nodes_region_idx` ON `nodes` (`region`);--> statement-breakpoint
CREATE TABLE `sessions` (
	`token_hash` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`user_id` text NOT NULL,
	`family_id` text NOT NULL,
	`expires_at` integer NOT NULL,
	`used_at` integer,
	`revoked_at` integer,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sessions_family_idx` ON `sessions` (`family_id`);--> statement-breakpoint
CREATE TABLE `settings` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `templates` (
	`id` text PRIMARY KEY NOT NULL,
	`slug` text NOT NULL,
	`name` text NOT NULL,
	`description` text NOT NULL,
	`category` text NOT NULL,
	`requires_gpu` integer NOT NULL,
	`min_gpu_vram_mb` integer NOT NULL,
	`container_image` text NOT NULL,
	`default_env` text NOT NULL,
	`ports` text NOT NULL,
	`min_cpu_cores` integer NOT NULL,
	`min_ram_mb` integer NOT NULL,
	`min_disk_gb` integer NOT NULL,
	`estimated_pull_time_s` integer NOT NULL,
	`sort_order` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `templates_slug_unique` ON `templates` (`slug`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` text PRIMARY KEY NOT NULL,
	`wallet_address` text NOT NULL,
	`is_operator` integer DEFAULT false NOT NULL,
	`balance_micro` integer DEFAULT 0 NOT NULL,
	`reserved_micro` integer DEFAULT 0 NOT NULL,
	`total_used_micro` integer DEFAULT 0 NOT NULL,
	`ledger_seq` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `users_wallet_address_unique` ON `users` (`wallet_address`);