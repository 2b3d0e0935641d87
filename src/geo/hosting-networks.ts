/**
 * Autonomous systems whose addresses are rented servers: cloud, VPS and dedicated hosting. Remote
 * device-code phishing mostly starts its flows from such machines, while a TV or a bot owner's
 * device sits on a home or office network; an approval page can therefore warn when the device
 * asked from one of these.
 *
 * Where the list comes from:
 * - Each entry is a provider widely known for renting servers, checked against two public lists of
 *   hosting ASNs, both MIT-licensed: X4BNet/lists_vpn, input/datacenter/ASN.txt (Copyright (c)
 *   2024 X4B (Mathew Heard)), read at commit 167937a7, and brianhama/bad-asn-list,
 *   bad-asn-list.csv (Copyright (c) 2025 Brian Hamachek), read at commit cac788be. `listedBy`
 *   says which of them has the entry.
 * - `organisation` is the name the shipped ASN data (@ip-location-db/asn 2.3.2026061719) gives the
 *   number; test/geo/locate.test.ts checks that every entry still has that name there. Entries
 *   with an empty `listedBy` are on neither list: they are further networks of the provider named
 *   in the comment above them, as their organisation's name shows.
 *
 * What it covers, and what not:
 * - About eighty ASNs of the large clouds and of well-known VPS and dedicated-server hosts. The two
 *   lists above have about 900; most of the rest are small hosts, but they also hold networks that
 *   are not server farms (transit carriers, universities, banks, a water district), so they were
 *   not copied whole.
 * - Left out on purpose: Cloudflare (AS13335) and the Akamai CDN networks, because consumer VPNs
 *   (Cloudflare WARP, iCloud Private Relay) send ordinary people's browsing from them: they are on
 *   the relay list (relay-networks.ts), a signal of its own; transit
 *   carriers such as Hurricane Electric and Cogent.
 * - Google (AS15169) and Microsoft (AS8075) also carry their own offices' traffic: a person at work
 *   there would be classed as on a hosting network.
 * - VPN services renting from these hosts are covered only through their host; residential proxy
 *   networks (a phishing kit's way around this check) are not covered at all: they use home ISPs.
 */
export interface HostingNetwork {
  asn: number;
  organisation: string;
  listedBy: readonly ('x4bnet' | 'bad-asn-list')[];
}

export const HOSTING_NETWORKS: readonly HostingNetwork[] = [
  // Amazon Web Services
  { asn: 16509, organisation: 'Amazon.com, Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 14618, organisation: 'Amazon.com, Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 8987, organisation: 'Amazon Data Services Ireland Ltd', listedBy: [] },
  // Google (Cloud and its own services)
  { asn: 396982, organisation: 'Google LLC', listedBy: ['x4bnet'] },
  { asn: 15169, organisation: 'Google LLC', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Microsoft (Azure and its own services)
  { asn: 8075, organisation: 'Microsoft Corporation', listedBy: ['x4bnet', 'bad-asn-list'] },
  // DigitalOcean
  { asn: 14061, organisation: 'DigitalOcean, LLC', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 393406, organisation: 'DigitalOcean, LLC', listedBy: [] },
  // Hetzner
  { asn: 24940, organisation: 'Hetzner Online GmbH', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 213230, organisation: 'Hetzner Online GmbH', listedBy: ['x4bnet'] },
  { asn: 212317, organisation: 'Hetzner Online GmbH', listedBy: ['x4bnet'] },
  { asn: 215859, organisation: 'Hetzner Online GmbH', listedBy: ['x4bnet'] },
  // OVHcloud
  { asn: 16276, organisation: 'OVH SAS', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Akamai Connected Cloud (Linode)
  { asn: 63949, organisation: 'Akamai Technologies, Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Vultr
  { asn: 20473, organisation: 'The Constant Company, LLC', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Contabo
  { asn: 51167, organisation: 'Contabo GmbH', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 141995, organisation: 'Contabo Asia Private Limited', listedBy: ['x4bnet'] },
  { asn: 40021, organisation: 'Contabo Inc.', listedBy: [] },
  // Alibaba Cloud
  { asn: 45102, organisation: 'Alibaba (US) Technology Co., Ltd.', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 134963, organisation: 'Alibaba Cloud (Singapore) Private Limited', listedBy: ['x4bnet'] },
  { asn: 37963, organisation: 'Hangzhou Alibaba Advertising Co.,Ltd.', listedBy: [] },
  // Tencent Cloud
  { asn: 45090, organisation: 'Shenzhen Tencent Computer Systems Company Limited', listedBy: ['x4bnet'] },
  { asn: 132203, organisation: 'Shenzhen Tencent Computer Systems Company Limited', listedBy: ['x4bnet'] },
  // Oracle Cloud
  { asn: 31898, organisation: 'Oracle Corporation', listedBy: ['x4bnet'] },
  // IBM Cloud
  { asn: 36351, organisation: 'IBM Cloud', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Huawei Cloud
  { asn: 136907, organisation: 'HUAWEI INTERNATIONAL PTE. LTD.', listedBy: ['x4bnet'] },
  { asn: 55990, organisation: 'Huawei Cloud Service data center', listedBy: ['x4bnet'] },
  // Scaleway
  { asn: 12876, organisation: 'Scaleway SAS', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Leaseweb
  { asn: 60781, organisation: 'LeaseWeb Netherlands B.V.', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 16265, organisation: 'LeaseWeb Network B.V.', listedBy: [] },
  { asn: 28753, organisation: 'Leaseweb Deutschland GmbH', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 30633, organisation: 'Leaseweb USA, Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 7203, organisation: 'Leaseweb USA, Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 19148, organisation: 'Leaseweb USA, Inc.', listedBy: ['x4bnet'] },
  { asn: 27411, organisation: 'Leaseweb USA, Inc.', listedBy: ['x4bnet'] },
  { asn: 394380, organisation: 'Leaseweb USA, Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 32613, organisation: 'Leaseweb Canada Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 59253, organisation: 'LEASEWEB SINGAPORE PTE. LTD.', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 133752, organisation: 'LEASEWEB HONG KONG LIMITED', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Rackspace
  { asn: 33070, organisation: 'Rackspace Hosting', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 27357, organisation: 'Rackspace Hosting', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 19994, organisation: 'Rackspace Hosting', listedBy: ['x4bnet'] },
  { asn: 15395, organisation: 'Rackspace Ltd.', listedBy: ['x4bnet', 'bad-asn-list'] },
  // IONOS
  { asn: 8560, organisation: 'IONOS SE', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Strato
  { asn: 6724, organisation: 'Strato AG', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Host Europe
  { asn: 8972, organisation: 'Host Europe GmbH', listedBy: ['x4bnet', 'bad-asn-list'] },
  // PlusServer
  { asn: 61157, organisation: 'PlusServer GmbH', listedBy: ['x4bnet', 'bad-asn-list'] },
  // netcup
  { asn: 197540, organisation: 'netcup GmbH', listedBy: ['x4bnet'] },
  // UpCloud
  { asn: 202053, organisation: 'UpCloud Ltd', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Kamatera
  { asn: 36007, organisation: 'Kamatera, Inc.', listedBy: ['x4bnet'] },
  { asn: 210329, organisation: 'Kamatera Inc', listedBy: ['x4bnet'] },
  // Selectel
  { asn: 49505, organisation: 'JSC Selectel', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Yandex Cloud
  { asn: 200350, organisation: 'Yandex.Cloud LLC', listedBy: ['x4bnet'] },
  // Aruba
  { asn: 31034, organisation: 'Aruba S.p.A.', listedBy: ['x4bnet'] },
  // GleSYS
  { asn: 42708, organisation: 'GleSYS AB', listedBy: ['x4bnet', 'bad-asn-list'] },
  // EDIS
  { asn: 57169, organisation: 'EDIS GmbH', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Sakura Internet
  { asn: 9370, organisation: 'SAKURA Internet Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Xneelo
  { asn: 37153, organisation: 'Xneelo (Pty) Ltd', listedBy: ['x4bnet', 'bad-asn-list'] },
  // M247
  { asn: 9009, organisation: 'M247 Europe SRL', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Datacamp (CDN77)
  { asn: 60068, organisation: 'Datacamp Limited', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 212238, organisation: 'Datacamp Limited', listedBy: ['x4bnet', 'bad-asn-list'] },
  // HostPapa (ColoCrossing, Hostwinds)
  { asn: 36352, organisation: 'HostPapa', listedBy: ['x4bnet', 'bad-asn-list'] },
  { asn: 54290, organisation: 'HostPapa', listedBy: ['x4bnet', 'bad-asn-list'] },
  // QuadraNet
  { asn: 8100, organisation: 'QuadraNet Enterprises LLC', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Psychz Networks
  { asn: 40676, organisation: 'Psychz Networks', listedBy: ['x4bnet', 'bad-asn-list'] },
  // FranTech (BuyVM)
  { asn: 53667, organisation: 'FranTech Solutions', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Hostinger
  { asn: 47583, organisation: 'Hostinger International Limited', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Servers.com
  { asn: 7979, organisation: 'Servers.com, Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Zenlayer
  { asn: 21859, organisation: 'Zenlayer Inc', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Cherry Servers
  { asn: 16125, organisation: 'UAB Cherry Servers', listedBy: ['x4bnet', 'bad-asn-list'] },
  // WorldStream
  { asn: 49981, organisation: 'WorldStream B.V.', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Serverius
  { asn: 50673, organisation: 'Serverius Holding B.V.', listedBy: ['x4bnet', 'bad-asn-list'] },
  // NForce
  { asn: 43350, organisation: 'NForce Entertainment B.V.', listedBy: ['x4bnet', 'bad-asn-list'] },
  // HostHatch
  { asn: 63473, organisation: 'HostHatch, LLC', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Hivelocity
  { asn: 29802, organisation: 'HIVELOCITY, Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Liquid Web
  { asn: 32244, organisation: 'Liquid Web, L.L.C', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Clouvider
  { asn: 62240, organisation: 'Clouvider Limited', listedBy: ['x4bnet', 'bad-asn-list'] },
  // GoDaddy
  { asn: 26496, organisation: 'GoDaddy.com, LLC', listedBy: ['x4bnet'] },
  // Unified Layer (Bluehost)
  { asn: 46606, organisation: 'Unified Layer', listedBy: ['x4bnet'] },
  // Equinix Metal (Packet)
  { asn: 54825, organisation: 'Packet Host, Inc.', listedBy: ['x4bnet', 'bad-asn-list'] },
  // Stark Industries
  { asn: 44477, organisation: 'AS44477', listedBy: ['x4bnet'] },
];
