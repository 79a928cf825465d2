CREATE TABLE `payouts` (
	`id` text PRIMARY KEY NOT NULL,
	`operator_id` text NOT NULL,
	`amount_micro` integer NOT NULL,
	`amount_stable_base` integer NOT NULL,
	`stable_mint` text NOT NULL,
	`stable_decimals` integer NOT NULL,
	`wallet_address` text NOT NULL,
	`status` text NOT NULL,
	`approved_at` integer,
	`attempt` integer NOT NULL,
	`signature` text,
	`signed_tx` text,
	`last_valid_block_height` integer,
	`earlier_signatures` text NOT NULL,
	`error` text,
	`lease_owner` text,
	`lease_until` integer,
	`requested_at` integer NOT NULL,
	`paid_at` integer,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `payouts_signature_unique` ON `payouts` (`signature`);--> statement-breakpoint
CREATE INDEX `payouts_operator_idx` ON `payouts` (`operator_id`,`requested_at`);--> statement-breakpoint
CREATE INDEX `payouts_status_idx` ON `payouts` (`status`);--> statement-breakpoint
ALTER TABLE `deposits` ADD `refusal_code` text;--> statement-breakpoint
ALTER TABLE `deposits` ADD `refusal_signature` text;--> statement-breakpoint
CREATE INDEX `deposits_open_idx` ON `deposits` (`status`,`expires_at`);