ALTER TABLE `nodes` ADD `egress_policy` text;--> statement-breakpoint
ALTER TABLE `nodes` ADD `disk_default_gb` integer;