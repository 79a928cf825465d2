CREATE TABLE `node_uptime_hours` (
	`node_id` text NOT NULL,
	`hour` integer NOT NULL,
	`online_ms` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `node_uptime_hours_pk` ON `node_uptime_hours` (`node_id`,`hour`);--> statement-breakpoint
CREATE TABLE `registry_credentials` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`registry` text NOT NULL,
	`username` text NOT NULL,
	`secret_sealed` text NOT NULL,
	`created_at` integer NOT NULL,
	`last_used_at` integer
);
--> statement-breakpoint
CREATE INDEX `registry_credentials_user_idx` ON `registry_credentials` (`user_id`,`created_at`);--> statement-breakpoint
ALTER TABLE `deployments` ADD `tcp_ports` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `deployments` ADD `registry_credential_id` text;--> statement-breakpoint
ALTER TABLE `nodes` ADD `used_disk_gb` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `nodes` ADD `maintenance_reason` text;--> statement-breakpoint
ALTER TABLE `nodes` ADD `maintenance_since` integer;